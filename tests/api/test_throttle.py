"""The API throttle: a sliding window of per-period counts in the throttle cache (Redis here), one budget per person
(all their tokens and their session), per team (all its team tokens) or per address (anonymous calls)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rest_framework.test import APIClient

from tenants.auth import TokenRateThrottle
from tenants.tokens import token_create
from tests.api.conftest import bearer


@pytest.fixture
def clock(monkeypatch):
    now = SimpleNamespace(t=6000.0)  # the start of a minute
    monkeypatch.setattr(TokenRateThrottle, "timer", lambda self: now.t)
    return now


@pytest.fixture
def allow(settings, clock):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "10/min"}}
    request = SimpleNamespace(auth=None, user=SimpleNamespace(is_authenticated=True, pk=7))

    def allow():
        throttle = TokenRateThrottle()
        return throttle.allow_request(request, None), throttle

    return allow


def test_it_lets_the_budget_through_in_a_period_and_says_when_to_come_back(allow, clock):
    assert all(allow()[0] for _ in range(10))
    clock.t += 15
    allowed, throttle = allow()
    assert not allowed and throttle.wait() == 45  # the rest of this minute
    clock.t += 45.001
    assert [allow()[0] for _ in range(2)] == [True, False]  # the last minute still weighs almost all its 10


def test_the_last_periods_count_weighs_less_as_the_window_slides(allow, clock):
    assert all(allow()[0] for _ in range(10))
    clock.t += 60 + 30  # half-way through the next minute: 10 * 0.5 = 5 of the budget left
    assert [allow()[0] for _ in range(6)] == [True] * 5 + [False]
    _, throttle = allow()
    assert throttle.wait() == pytest.approx(0)  # from now on the last minute weighs under 10 - 5
    clock.t += 6  # it weighs 10 * 0.4 = 4: one more
    assert [allow()[0] for _ in range(2)] == [True, False]
    clock.t += 60 * 2
    assert all(allow()[0] for _ in range(10))  # two minutes of quiet: the whole budget again


def test_every_request_let_through_is_counted_once(allow):
    for _ in range(7):
        allow()
    _, throttle = allow()
    assert throttle.current == 7  # counted in one atomic increment each


# --- Whose budget a request spends ---------------------------------------------------
# Keyed on who is behind a request, not on the credential: tokens cost nothing to make,
# so a budget per token let one script or one team's CI take several budgets' worth.


@pytest.fixture
def api_rate(settings, clock):
    """The API budget set to `rate`, on a stopped clock (no minute boundary halfway through a test)."""

    def _set(rate: str):
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": rate}}

    return _set


def session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def user_token(user, name: str) -> APIClient:
    return bearer(token_create(name=name, user=user)[1])


def test_a_persons_tokens_and_session_share_one_budget(api_rate, owner):
    api_rate("4/min")
    clients = [user_token(owner, f"script-{n}") for n in range(3)] + [session(owner)]
    assert [client.get("/api/v1/jobs/").status_code for client in clients] == [200] * 4
    refused = [client.get("/api/v1/jobs/") for client in clients]
    assert [response.status_code for response in refused] == [429] * 4
    detail = refused[0].json()["detail"]
    assert "for you (at most 4/min, shared by your tokens and your session)" in detail
    assert 1 <= int(refused[-1]["Retry-After"]) <= 60


def test_the_429_says_the_wait_once_as_retry_after_does(api_rate, tokens):
    api_rate("1/min")
    client = bearer(tokens["maps_token"])
    client.get("/api/v1/jobs/")
    refused = client.get("/api/v1/jobs/")
    assert refused.status_code == 429
    assert refused.json()["detail"] == ("Too many requests for team maps (at most 1/min, shared by all its tokens); "
                                        f"retry in {refused['Retry-After']} s.")  # fmt: skip


def test_a_teams_tokens_share_the_teams_budget(api_rate, maps, lead, tokens):
    api_rate("3/min")
    first, second = bearer(tokens["maps_token"]), bearer(token_create(name="ci-nightly", team=maps)[1])
    assert [client.get("/api/v1/jobs/").status_code for client in (first, second, first)] == [200] * 3
    refused = second.get("/api/v1/jobs/")
    assert refused.status_code == 429 and first.get("/api/v1/jobs/").status_code == 429
    assert "for team maps (at most 3/min, shared by all its tokens)" in refused.json()["detail"]
    assert bearer(tokens["vision_token"]).get("/api/v1/jobs/").status_code == 200  # another team's budget
    assert session(lead).get("/api/v1/jobs/").status_code == 200  # a person of the team spends their own


def test_two_people_do_not_share_a_budget(api_rate, owner, member):
    api_rate("2/min")
    owners = [user_token(owner, "laptop"), session(owner)]
    assert [client.get("/api/v1/jobs/").status_code for client in owners * 2] == [200, 200, 429, 429]
    members = [user_token(member, "laptop"), session(member)]
    assert [client.get("/api/v1/jobs/").status_code for client in members * 2] == [200, 200, 429, 429]
