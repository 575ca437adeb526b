"""The admin's quota forms (a quota row, a team with its quota rows inline and its weight) refuse a save
from a page opened before another admin changed those figures, naming the change, instead of undoing it."""

from __future__ import annotations

import json

import pytest

from tenants.models import AuditEntry, Quota, Team
from tests.page_forms import opened

pytestmark = pytest.mark.django_db

STALE = "Since you opened this page, gpu nominal was changed from 8 GPUs to 4 GPUs by alice"


def quota_url(maps) -> str:
    return f"/admin/tenants/quota/{Quota.objects.get(team=maps, resource='gpu').pk}/change/"


def alice_halves_the_nominal_on_the_quota_page(alice) -> None:
    page = opened(alice, "/teams/maps/quota/")
    assert alice.post("/teams/maps/quota/", page | {"gpu_nominal": "4"}).status_code == 302


def loaded_with(token: str) -> dict:
    """The figures a form's hidden field says it was loaded with."""
    return json.loads(token)["figures"]


def gpu_quota() -> tuple[int, int | None]:
    quota = Quota.objects.get(team__slug="maps", resource="gpu")
    return quota.nominal, quota.borrowing_limit


def test_a_stale_quota_row_is_refused(alice, bob, maps):
    bobs_page = opened(bob, quota_url(maps))
    alice_halves_the_nominal_on_the_quota_page(alice)
    response = bob.post(quota_url(maps), bobs_page | {"borrowing_limit": "0"})
    assert gpu_quota() == (4, 8) and AuditEntry.objects.count() == 1
    assert response.status_code == 200 and STALE in response.content.decode()
    assert "reload the page to see the current quota and make your change again" in response.content.decode()


def test_an_up_to_date_quota_row_saves(alice, bob, maps):
    alice_halves_the_nominal_on_the_quota_page(alice)
    bobs_page = opened(bob, quota_url(maps))
    assert loaded_with(bobs_page["loaded"]) == {"gpu": {
        "nominal": 4, "borrowing_limit": 8, "lending_limit": None, "max_per_replica": 8, "default_per_replica": None}}
    response = bob.post(quota_url(maps), bobs_page | {"borrowing_limit": "0"})
    assert response.status_code == 302
    assert gpu_quota() == (4, 0)


def test_a_stale_inline_quota_row_on_the_team_page_is_refused(alice, bob, maps):
    url = f"/admin/tenants/team/{maps.pk}/change/"
    bobs_page = opened(bob, url)
    alice_halves_the_nominal_on_the_quota_page(alice)
    response = bob.post(url, bobs_page | {"name": "Maps and roads"})
    assert response.status_code == 200 and STALE in response.content.decode()
    assert gpu_quota() == (4, 8) and Team.objects.get(pk=maps.pk).name == "Maps"


def test_a_stale_weight_on_the_team_page_is_refused(alice, bob, maps):
    url = f"/admin/tenants/team/{maps.pk}/change/"
    bobs_page = opened(bob, url)
    page = opened(alice, "/teams/maps/quota/")
    alice.post("/teams/maps/quota/", page | {"weight": "2"})
    response = bob.post(url, bobs_page | {"name": "Maps and roads"})
    assert response.status_code == 200
    assert "Since you opened this page, the weight was changed from 1.0 to 2.0 by alice" in response.content.decode()
    assert Team.objects.get(pk=maps.pk).weight == 2.0


def test_an_up_to_date_team_page_saves(bob, maps):
    url = f"/admin/tenants/team/{maps.pk}/change/"
    bobs_page = opened(bob, url)
    assert loaded_with(bobs_page["loaded"]) == {"weight": 1.0}
    assert loaded_with(bobs_page["quotas-0-loaded"])["gpu"]["nominal"] == 8
    response = bob.post(url, bobs_page | {"name": "Maps and roads", "quotas-0-nominal": "6"})
    assert response.status_code == 302
    assert Team.objects.get(pk=maps.pk).name == "Maps and roads" and gpu_quota() == (6, 8)
