"""Tokens expire: a lifetime chosen at creation (pages, API, command), capped by TOKEN_MAX_LIFETIME; an expired
token answers 401 saying when it expired, no longer counts toward USER_TOKEN_LIMIT, and reads as expired."""

from __future__ import annotations

from datetime import UTC, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tenants.models import ApiToken, AuditEntry
from tenants.tokens import token_create
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db


def expire(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(minutes=1))


def test_an_expired_team_token_answers_401_saying_when(maps):
    token, value = token_create(name="ci-old", team=maps, days=30)
    assert bearer(value).get("/api/v1/jobs/").status_code == 200
    expire(token)
    response = bearer(value).get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response.json()["detail"].startswith(f"Token {token.prefix}... expired on ")
    assert "ask a team lead for a new one" in response.json()["detail"]


def test_an_expired_user_token_says_where_to_make_a_new_one(owner):
    token, value = token_create(name="laptop", user=owner, days=7)
    expire(token)
    response = bearer(value).get("/api/v1/jobs/")
    assert response.status_code == 401 and "make a new one on your tokens page" in response.json()["detail"]


def test_the_api_creates_a_token_with_the_lifetime_asked(as_persona):
    before = timezone.now()
    body = as_persona("lead").post("/api/v1/teams/maps/tokens/", {"name": "ci-new", "expires_in_days": 30},
                                   format="json").json()  # fmt: skip
    expires = ApiToken.objects.get(name="ci-new").expires_at
    assert timedelta(days=30) <= expires - before <= timedelta(days=30, minutes=1)
    assert body["expires_at"] and bearer(body["token"]).get("/api/v1/jobs/").status_code == 200
    audit = AuditEntry.objects.get(subject="token", team__slug="maps", summary__contains="ci-new")
    assert f"expiring {expires:%Y-%m-%d %H:%M} UTC" in audit.summary


def test_without_a_cap_an_api_token_left_without_a_lifetime_never_expires(as_persona):
    body = as_persona("owner").post("/api/v1/tokens/", {"name": "laptop"}, format="json").json()
    assert body["expires_at"] is None and ApiToken.objects.get(name="laptop").expires_at is None


def test_with_a_cap_a_token_left_without_a_lifetime_gets_the_cap(as_persona, settings):
    settings.TOKEN_MAX_LIFETIME = 90
    body = as_persona("owner").post("/api/v1/tokens/", {"name": "laptop"}, format="json").json()
    assert body["expires_at"] is not None
    left = ApiToken.objects.get(name="laptop").expires_at - timezone.now()
    assert timedelta(days=89) < left <= timedelta(days=90)


@pytest.mark.parametrize("asked", [None, 91, 400])
def test_the_api_refuses_a_lifetime_above_the_cap_and_creates_nothing(as_persona, settings, asked):
    settings.TOKEN_MAX_LIFETIME = 90
    response = as_persona("lead").post("/api/v1/teams/maps/tokens/", {"name": "ci-new", "expires_in_days": asked},
                                       format="json")  # fmt: skip
    assert response.status_code == 400
    assert "at most 90 days here (TOKEN_MAX_LIFETIME)" in response.json()["expires_in_days"][0]
    assert not ApiToken.objects.filter(name="ci-new").exists()


@pytest.mark.parametrize("asked", [0, -3, "soon"])
def test_the_api_refuses_a_lifetime_that_is_not_a_number_of_days(as_persona, asked):
    response = as_persona("owner").post("/api/v1/tokens/", {"name": "laptop", "expires_in_days": asked},
                                        format="json")  # fmt: skip
    assert response.status_code == 400 and "expires_in_days" in response.json()
    assert not ApiToken.objects.filter(name="laptop").exists()


def test_expired_tokens_do_not_count_toward_the_limit(owner, settings):
    settings.USER_TOKEN_LIMIT = 1
    old, _ = token_create(name="old", user=owner, days=7)
    expire(old)
    token_create(name="new", user=owner, days=7)  # not refused: the old one no longer authenticates


def test_the_command_takes_a_lifetime_and_says_when_it_expires(maps):
    out, err = StringIO(), StringIO()
    call_command("create_token", team="maps", name="ci-cmd", expires_in_days=10, stdout=out, stderr=err)
    token = ApiToken.objects.get(name="ci-cmd")
    assert token.expires_at is not None and f"it expires {token.expires_at:%Y-%m-%d %H:%M} UTC" in err.getvalue()


def test_the_command_refuses_a_lifetime_above_the_cap(maps, settings):
    settings.TOKEN_MAX_LIFETIME = 30
    with pytest.raises(CommandError, match=r"at most 30 days here \(TOKEN_MAX_LIFETIME\)"):
        call_command("create_token", team="maps", name="ci-cmd", expires_in_days=31, stdout=StringIO())
    assert not ApiToken.objects.filter(name="ci-cmd").exists()


def test_an_expired_token_no_longer_protects_the_tier_it_capped(maps, tiers, admin_client):
    from django.contrib import admin

    from tenants.models import PriorityTier

    token, _ = token_create(name="ci-capped", team=maps, max_tier=tiers["standard"], days=7)
    model_admin = admin.site._registry[PriorityTier]
    request = admin_client.get("/").wsgi_request
    *_, protected = model_admin.get_deleted_objects([tiers["standard"]], request)
    assert any("ci-capped" in line for line in protected)
    expire(token)
    *_, protected = model_admin.get_deleted_objects([tiers["standard"]], request)
    assert not any("ci-capped" in line for line in protected)


def test_every_answer_to_an_expiring_token_says_when_it_expires(maps):
    token, value = token_create(name="ci-soon", team=maps, days=5)
    answer = bearer(value).get("/api/v1/jobs/")
    assert answer["Gangway-Token-Expires"] == f"{token.expires_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    assert bearer(value).get("/api/v1/jobs/999999/")["Gangway-Token-Expires"]  # a 404 too


def test_no_expiry_header_for_a_token_that_never_expires_or_a_session(maps, owner):
    _, value = token_create(name="ci-forever", team=maps)
    assert "Gangway-Token-Expires" not in bearer(value).get("/api/v1/jobs/")
