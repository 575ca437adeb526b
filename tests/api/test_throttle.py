"""The per-token throttle: a sliding window of per-period counts in the throttle cache (Redis here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tenants.auth import TokenRateThrottle


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
