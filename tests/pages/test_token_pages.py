"""Token pages: a team's API tokens (leads and staff) and each user's own, with the value shown once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ApiToken, AuditEntry
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

PERSONAS = ("owner", "member", "lead", "outsider", "staff", "anonymous")
MANAGES = {"owner": 403, "member": 403, "lead": 200, "outsider": 404, "staff": 200, "anonymous": 302}
VALUE = re.compile(r'id="new-token"[^>]*value="(gw_[^"]+)"')


@pytest.fixture(autouse=True)
def teams(maps, vision):
    return maps, vision


@pytest.fixture
def as_persona(request, login):
    def _client(persona: str):
        return login(None if persona == "anonymous" else request.getfixturevalue(persona))

    return _client


def shown_value(response) -> str | None:
    match = VALUE.search(response.content.decode())
    return match.group(1) if match else None


def api_status(value: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    return client.get("/api/v1/jobs/").status_code


@pytest.mark.parametrize("persona", PERSONAS)
def test_access_to_the_team_tokens_page(as_persona, persona):
    assert as_persona(persona).get("/teams/maps/tokens/").status_code == MANAGES[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_leads_and_staff_create_team_tokens(as_persona, persona):
    response = as_persona(persona).post("/teams/maps/tokens/", {"name": "ci-main"})
    assert response.status_code == MANAGES[persona]
    assert ApiToken.objects.filter(team__slug="maps").count() == (1 if MANAGES[persona] == 200 else 0)


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_leads_and_staff_revoke_team_tokens(as_persona, persona, maps):
    token, _ = token_create(name="ci-main", team=maps)
    response = as_persona(persona).post(f"/teams/maps/tokens/{token.pk}/revoke/")
    assert response.status_code == {**MANAGES, "lead": 302, "staff": 302}[persona]
    token.refresh_from_db()
    assert token.is_revoked == (persona in ("lead", "staff"))


def test_the_team_page_shows_token_controls_to_leads_and_staff_only(login, owner, lead, staff):
    assert "/teams/maps/tokens/" not in login(owner).get("/teams/maps/").content.decode()
    assert "/teams/maps/tokens/" in login(lead).get("/teams/maps/").content.decode()
    assert "/teams/maps/tokens/" in login(staff).get("/teams/maps/").content.decode()


def test_every_page_links_my_tokens_from_the_header(login, owner):
    assert 'href="/tokens/"' in login(owner).get("/jobs/").content.decode()


def test_the_value_is_shown_once(login, lead, tiers):
    client = login(lead)
    response = client.post("/teams/maps/tokens/", {"name": "ci-main", "max_tier": tiers["standard"].pk})
    value = shown_value(response)
    assert response.status_code == 200 and value and "will not be shown again" in response.content.decode()
    token = ApiToken.objects.get()
    assert (token.name, token.max_tier, token.created_by, token.prefix) == ("ci-main", tiers["standard"], lead, value[:10])
    assert value not in token.digest
    page = client.get("/teams/maps/tokens/").content.decode()
    assert value not in page and shown_value(client.get("/teams/maps/tokens/")) is None
    assert f"{token.prefix}…" in page and "ci-main" in page and "standard" in page
    assert AuditEntry.objects.filter(subject="token", actor=lead).exists()


def test_an_htmx_create_answers_the_form_and_the_list_out_of_band(login, lead, htmx):
    response = login(lead).post("/teams/maps/tokens/", {"name": "ci-main"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<section class="card" id="token-create"')
    assert shown_value(response) and 'id="token-list"' in body and 'hx-swap-oob="true"' in body


def test_an_invalid_name_answers_422_by_the_field(login, lead, htmx):
    response = login(lead).post("/teams/maps/tokens/", {"name": "two  spaces"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 422
    assert "The token was not created" in body and 'class="field-error"' in body
    assert shown_value(response) is None and not ApiToken.objects.exists()


def test_a_tier_the_team_may_not_use_answers_422(login, lead, maps, tiers):
    maps.tiers.set([tiers["standard"]])
    response = login(lead).post("/teams/maps/tokens/", {"name": "ci", "max_tier": tiers["production"].pk})
    assert response.status_code == 422 and not ApiToken.objects.exists()


def test_a_revoked_token_no_longer_authenticates_the_api(login, lead, htmx):
    client = login(lead)
    value = shown_value(client.post("/teams/maps/tokens/", {"name": "ci-main"}))
    assert api_status(value) == 200
    token = ApiToken.objects.get()
    response = client.post(f"/teams/maps/tokens/{token.pk}/revoke/", **htmx)
    assert response.status_code == 200 and "Revoked token ci-main" in response.content.decode()
    assert "badge s-cancelled" in response.content.decode()
    assert api_status(value) == 401


def test_a_lead_cannot_revoke_another_teams_token_through_their_team(login, lead, vision):
    token, _ = token_create(name="theirs", team=vision)
    assert login(lead).post(f"/teams/maps/tokens/{token.pk}/revoke/").status_code == 404
    assert login(lead).post(f"/teams/vision/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert not token.is_revoked


def test_the_revoke_button_asks_for_confirmation(login, lead, maps):
    token_create(name="ci-main", team=maps)
    assert 'hx-confirm="Revoke token ci-main' in login(lead).get("/teams/maps/tokens/").content.decode()


def test_posts_need_the_csrf_token(csrf_client, lead, maps):
    csrf_client.force_login(lead)
    assert csrf_client.post("/teams/maps/tokens/", {"name": "ci"}).status_code == 403
    token, _ = token_create(name="ci-main", team=maps)
    assert csrf_client.post(f"/teams/maps/tokens/{token.pk}/revoke/").status_code == 403
    assert csrf_client.post("/tokens/", {"name": "laptop"}).status_code == 403
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize("persona", PERSONAS)
def test_everyone_signed_in_has_a_my_tokens_page(as_persona, persona):
    assert as_persona(persona).get("/tokens/").status_code == (302 if persona == "anonymous" else 200)


def test_my_tokens_creates_a_user_token_that_acts_as_me(login, member):
    client = login(member)
    response = client.post("/tokens/", {"name": "laptop", "max_tier": "ignored"})
    value = shown_value(response)
    token = ApiToken.objects.get()
    assert (token.user, token.team, token.max_tier) == (member, None, None)
    client.logout()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    assert [team["slug"] for team in api.get("/api/v1/teams/").json()["results"]] == ["maps"]


def test_my_tokens_lists_only_my_own(login, member, owner, maps):
    token_create(name="mine", user=member)
    token_create(name="not-mine", user=owner)
    token_create(name="team-one", team=maps)
    body = login(member).get("/tokens/").content.decode()
    assert "mine" in body and "not-mine" not in body and "team-one" not in body


def test_i_revoke_my_own_token_but_not_anothers(login, member, owner):
    mine, _ = token_create(name="mine", user=member)
    theirs, _ = token_create(name="theirs", user=owner)
    client = login(member)
    assert client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert client.post(f"/tokens/{mine.pk}/revoke/").status_code == 302
    mine.refresh_from_db(), theirs.refresh_from_db()
    assert mine.is_revoked and not theirs.is_revoked


def test_the_empty_state_says_what_to_do(login, lead):
    body = login(lead).get("/teams/maps/tokens/").content.decode()
    assert "No tokens yet — create one for CI" in body
    assert "0 tokens" not in body and "newest first" not in body  # no order told of a list that is not there


def test_a_user_token_over_the_limit_answers_422_saying_so(login, member, settings, htmx):
    settings.USER_TOKEN_LIMIT = 1
    token_create(name="laptop", user=member)
    response = login(member).post("/tokens/", {"name": "desktop"}, **htmx)
    body = response.content.decode()
    assert response.status_code == 422 and shown_value(response) is None
    assert "one person may hold at most 1 (USER_TOKEN_LIMIT)" in body
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["laptop"]


@pytest.mark.parametrize("page", ["/tokens/", "/teams/maps/tokens/"])
def test_the_token_pages_lead_to_the_api_reference(login, lead, page):
    body = login(lead).get(page).content.decode()
    assert body.count('href="/api/schema/redoc/"') == 2  # on the page, and in every page's footer


def test_the_form_offers_lifetimes_and_a_new_token_lives_the_one_chosen(login, lead):
    client = login(lead)
    form = client.get("/teams/maps/tokens/").content.decode()
    assert re.search(r'<option value="90" selected>90 days</option>', form) and '<option value="">Never</option>' in form
    response = client.post("/teams/maps/tokens/", {"name": "ci-main", "lifetime": "30"})
    token = ApiToken.objects.get()
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert f"expiring {timezone.localtime(token.expires_at):%Y-%m-%d %H:%M}" in response.content.decode()
    never = client.post("/teams/maps/tokens/", {"name": "ci-forever", "lifetime": ""})
    assert never.status_code == 200 and ApiToken.objects.get(name="ci-forever").expires_at is None


def test_with_a_cap_the_form_offers_only_lifetimes_within_it_and_refuses_never(login, member, settings):
    settings.TOKEN_MAX_LIFETIME = 30
    client = login(member)
    form = client.get("/tokens/").content.decode()
    assert "Never</option>" not in form and ">90 days<" not in form and ">1 year<" not in form
    assert '<option value="30" selected>30 days</option>' in form
    refused = client.post("/tokens/", {"name": "laptop", "lifetime": ""})
    assert refused.status_code == 422 and "at most 30 days here (TOKEN_MAX_LIFETIME)" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_a_cap_shorter_than_a_week_is_offered_as_it_is(login, member, settings):
    settings.TOKEN_MAX_LIFETIME = 3
    form = login(member).get("/tokens/").content.decode()
    assert '<option value="3" selected>3 days</option>' in form and "7 days" not in form


def test_an_expired_token_reads_as_expired_with_nothing_to_revoke(login, lead, maps):
    token, value = token_create(name="ci-old", team=maps, days=7)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(hours=1))
    page = login(lead).get("/teams/maps/tokens/").content.decode()
    row = re.search(rf'<tr id="token-{token.pk}" class="revoked">.*?</tr>', page, re.S).group(0)
    assert '<span class="badge s-failed">expired</span>' in row and "Revoke" not in row
    assert api_status(value) == 401


def test_the_team_page_tells_its_leads_which_tokens_expire_soon(login, owner, lead, maps):
    token_create(name="ci-soon", team=maps, days=5)
    token_create(name="ci-later", team=maps, days=90)
    token_create(name="ci-forever", team=maps)
    gone, _ = token_create(name="ci-gone", team=maps, days=3)
    ApiToken.objects.filter(pk=gone.pk).update(expires_at=timezone.now() - timedelta(hours=1))
    page = login(lead).get("/teams/maps/").content.decode()
    notice = re.search(r'<p class="flash warning" role="status" id="tokens-expiring">(.*?)</p>', page, re.S).group(1)
    assert notice.startswith("API token <b>ci-soon</b>") and "expires soon: whatever uses it gets 401" in notice
    assert "ci-later" not in notice and "ci-forever" not in notice and "ci-gone" not in notice
    assert 'id="tokens-expiring"' not in login(owner).get("/teams/maps/").content.decode()  # not theirs to renew


def test_several_tokens_expiring_are_named_together(login, lead, maps):
    token_create(name="ci-a", team=maps, days=2)
    token_create(name="ci-b", team=maps, days=9)
    page = login(lead).get("/teams/maps/").content.decode()
    notice = re.search(r'id="tokens-expiring">(.*?)</p>', page, re.S).group(1)
    assert notice.startswith("API tokens <b>ci-a</b>") and " and <b>ci-b</b>" in notice
    assert "expire soon: whatever uses them" in notice


def test_the_list_gives_each_token_its_expiry_date(login, lead, maps):
    token, _ = token_create(name="ci-90", team=maps, days=90)
    token_create(name="ci-forever", team=maps)
    page = login(lead).get("/teams/maps/tokens/").content.decode()
    row = re.search(rf'<tr id="token-{token.pk}">.*?</tr>', page, re.S).group(0)
    expires = re.search(r'<td data-label="Expires">(.*?)</td>', row).group(1)
    assert expires.endswith(f">{timezone.localtime(token.expires_at):%Y-%m-%d}</time>") and "from now" not in expires
