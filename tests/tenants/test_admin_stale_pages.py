"""An admin page opened before another change of its row (a token revoked by a lead, a tier changed by another
admin) posts that row's old values back: the save is refused, naming what changed, instead of undoing it."""

from __future__ import annotations

import pytest

from tenants.models import ApiToken, AuditEntry, GpuType, Membership, PriorityTier
from tenants.tokens import token_create, token_revoke
from tests.page_forms import opened

pytestmark = pytest.mark.django_db

RELOAD = "nothing was saved — reload the page to see it and make your change again."


def test_a_token_revoked_while_its_page_was_open_stays_revoked(alice, maps, lead):
    token, _ = token_create(name="ci-main", team=maps)
    url = f"/admin/tenants/apitoken/{token.pk}/change/"
    page = opened(alice, url)
    token_revoke(token=token, actor=lead)  # the lead revokes it on the tokens page meanwhile

    response = alice.post(url, page | {"name": "ci-main-renamed"})

    token.refresh_from_db()
    assert token.revoked_at is not None and token.name == "ci-main"
    assert response.status_code == 200
    assert f"Since you opened this page, another change was saved to revoked at; {RELOAD}" in response.content.decode()


def test_a_tier_changed_by_another_admin_is_not_undone(alice, bob, tiers):
    url = f"/admin/tenants/prioritytier/{tiers['standard'].pk}/change/"
    bobs_page = opened(bob, url)
    alices_page = opened(alice, url)
    assert alice.post(url, alices_page | {"grace_period": "600"}).status_code == 302

    response = bob.post(url, bobs_page | {"description": "The everyday tier"})

    tier = PriorityTier.objects.get(pk=tiers["standard"].pk)
    assert tier.grace_period == 600 and tier.description != "The everyday tier"
    assert f"another change was saved to grace period; {RELOAD}" in response.content.decode()
    assert AuditEntry.objects.filter(subject="prioritytier").count() == 1


def test_a_page_opened_after_the_change_saves(alice, bob, tiers):
    url = f"/admin/tenants/prioritytier/{tiers['standard'].pk}/change/"
    assert alice.post(url, opened(alice, url) | {"grace_period": "600"}).status_code == 302
    assert bob.post(url, opened(bob, url) | {"description": "The everyday tier"}).status_code == 302
    tier = PriorityTier.objects.get(pk=tiers["standard"].pk)
    assert (tier.grace_period, tier.description) == (600, "The everyday tier")


def test_a_role_changed_by_another_admin_is_not_undone(alice, bob, maps, member):
    membership = Membership.objects.get(user=member, team=maps)
    url = f"/admin/tenants/membership/{membership.pk}/change/"
    bobs_page = opened(bob, url)
    assert alice.post(url, opened(alice, url) | {"role": "lead"}).status_code == 302

    response = bob.post(url, bobs_page)  # saved as it was opened: a member

    assert Membership.objects.get(pk=membership.pk).role == "lead"
    assert f"another change was saved to role; {RELOAD}" in response.content.decode()


def test_a_team_page_opened_before_a_tier_was_taken_off_does_not_put_it_back(alice, bob, maps, tiers):
    url = f"/admin/tenants/team/{maps.pk}/change/"
    bobs_page = opened(bob, url)
    alices_page = opened(alice, url)
    kept = [str(tier.pk) for tier in maps.tiers.exclude(pk=tiers["production"].pk)]
    assert alice.post(url, {**alices_page, "tiers": kept}).status_code == 302

    response = bob.post(url, bobs_page | {"name": "Maps and routing"})

    maps.refresh_from_db()
    assert not maps.tiers.filter(pk=tiers["production"].pk).exists() and maps.name != "Maps and routing"
    assert f"another change was saved to tiers; {RELOAD}" in response.content.decode()


def test_a_token_page_still_revokes(alice, maps):
    token, _ = token_create(name="ci-main", team=maps)
    url = f"/admin/tenants/apitoken/{token.pk}/change/"
    assert alice.post(url, opened(alice, url) | {"revoked_at_0": "2030-01-01", "revoked_at_1": "10:00:00"}).status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_a_post_that_does_not_say_what_it_was_loaded_with_is_refused(alice, tiers):
    url = f"/admin/tenants/prioritytier/{tiers['standard'].pk}/change/"
    page = opened(alice, url)
    del page["row_loaded"]
    response = alice.post(url, page | {"grace_period": "600"})
    assert PriorityTier.objects.get(pk=tiers["standard"].pk).grace_period != 600
    assert "This form does not say what it was loaded with" in response.content.decode()


def test_a_gpu_type_changed_by_another_admin_is_not_undone(alice, bob, gpu_types):
    url = f"/admin/tenants/gputype/{gpu_types['a100'].pk}/change/"
    bobs_page = opened(bob, url)
    assert alice.post(url, opened(alice, url) | {"value": "NVIDIA-A100-SXM4-40GB"}).status_code == 302

    response = bob.post(url, bobs_page | {"description": "80 GB, the fastest"})

    a100 = GpuType.objects.get(pk=gpu_types["a100"].pk)
    assert (a100.value, a100.description) == ("NVIDIA-A100-SXM4-40GB", "80 GB, large training")
    assert f"another change was saved to value; {RELOAD}" in response.content.decode()
    assert AuditEntry.objects.filter(subject="gputype").count() == 1


def test_a_gpu_type_renamed_by_another_admin_is_not_renamed_back(alice, bob, gpu_types, maps):
    url = f"/admin/tenants/gputype/{gpu_types['a100'].pk}/change/"
    bobs_page = opened(bob, url)
    assert alice.post(url, opened(alice, url) | {"name": "a100-80gb"}).status_code == 302

    response = bob.post(url, bobs_page | {"order": "5"})  # his page still says a100

    assert GpuType.objects.get(pk=gpu_types["a100"].pk).name == "a100-80gb"
    assert set(maps.quotas.values_list("resource", flat=True)) == {"gpu:l4", "gpu:a100-80gb"}
    assert f"another change was saved to name; {RELOAD}" in response.content.decode()


def test_a_gpu_type_page_opened_after_the_change_saves(alice, bob, gpu_types):
    url = f"/admin/tenants/gputype/{gpu_types['a100'].pk}/change/"
    assert alice.post(url, opened(alice, url) | {"value": "NVIDIA-A100-SXM4-40GB"}).status_code == 302
    assert bob.post(url, opened(bob, url) | {"description": "80 GB, the fastest"}).status_code == 302
    a100 = GpuType.objects.get(pk=gpu_types["a100"].pk)
    assert (a100.value, a100.description) == ("NVIDIA-A100-SXM4-40GB", "80 GB, the fastest")
