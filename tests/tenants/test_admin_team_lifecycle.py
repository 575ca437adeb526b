"""A team's slug, a tier's deletion and a team's deletion in the admin: what the loop and the tokens rely on
stays, and the history of who did what stays readable."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tenants.models import ApiToken, AuditEntry, PriorityTier, Team
from tenants.tokens import token_create
from tests.conftest import spec_data
from tests.page_forms import opened

pytestmark = pytest.mark.django_db


def test_a_teams_slug_is_fixed_once_it_exists(alice, maps):
    url = f"/admin/tenants/team/{maps.pk}/change/"
    page = alice.get(url).content.decode()
    assert 'name="slug"' not in page and "maps" in page  # shown, not editable
    response = alice.post(url, opened(alice, url) | {"slug": "mapping", "name": "Maps renamed"})
    assert response.status_code == 302
    maps.refresh_from_db()
    assert (maps.slug, maps.name) == ("maps", "Maps renamed")  # the jobs' namespace did not move


def test_a_new_team_is_given_its_slug(alice, maps):
    assert 'name="slug"' in alice.get("/admin/tenants/team/add/").content.decode()


@pytest.fixture
def ci_tier(maps):
    ci = PriorityTier.objects.create(name="ci", value=50, grace_period=10)
    maps.tiers.add(ci)
    return ci


def test_a_tier_capping_a_token_in_use_is_not_deleted(alice, maps, tiers, ci_tier, throttle_cache):
    _, value = token_create(name="ci-main", team=maps, max_tier=ci_tier)
    url = f"/admin/tenants/prioritytier/{ci_tier.pk}/delete/"
    page = alice.get(url).content.decode()
    assert "API token ci-main of team maps (max tier ci)" in page
    assert alice.post(url, {"post": "yes"}).status_code == 200  # the page again, nothing deleted
    assert PriorityTier.objects.filter(name="ci").exists()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    assert client.post("/api/v1/jobs/", spec_data(tier="production"), format="json").status_code == 403


def test_a_tier_capping_only_revoked_tokens_is_deleted(alice, maps, ci_tier):
    token, _ = token_create(name="old-ci", team=maps, max_tier=ci_tier)
    ApiToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")
    assert alice.post(f"/admin/tenants/prioritytier/{ci_tier.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not PriorityTier.objects.filter(name="ci").exists()


def test_the_tiers_bulk_delete_keeps_a_tier_capping_a_token(alice, maps, ci_tier):
    token_create(name="ci-main", team=maps, max_tier=ci_tier)
    response = alice.post("/admin/tenants/prioritytier/", {
        "action": "delete_selected", "_selected_action": [ci_tier.pk], "post": "yes"})
    assert "ci-main" in response.content.decode()
    assert PriorityTier.objects.filter(name="ci").exists()


def test_a_deleted_team_keeps_its_history_and_the_deletion_is_in_it(alice, maps, vision):
    url = f"/admin/tenants/team/{vision.pk}/change/"
    alice.post(url, opened(alice, url) | {"weight": "2"})
    assert alice.post(f"/admin/tenants/team/{vision.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(slug="vision").exists()
    summaries = list(AuditEntry.objects.filter(subject="team").values_list("summary", flat=True))
    assert any("vision" in s and "deleted" in s for s in summaries)
    assert any("vision" in s and "weight" in s for s in summaries)
