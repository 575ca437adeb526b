"""Admin edits of quotas, tiers, memberships and tokens are recorded: who, when, before, after."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from portal import triggers
from tenants.audit import record, snapshot
from tenants.models import ApiToken, AuditEntry, Membership, Quota
from tests.page_forms import opened


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    client.user = user
    return client


def test_it_records_a_quota_edit_with_before_and_after(admin_client, maps):
    quota = Quota.objects.get(team=maps, resource="gpu")
    url = f"/admin/tenants/quota/{quota.pk}/change/"
    response = admin_client.post(url, {
        "team": maps.pk, "resource": "gpu", "nominal": 12, "borrowing_limit": 4, "lending_limit": "",
        "max_per_replica": 8, "default_per_replica": "", "loaded": opened(admin_client, url)["loaded"],
    })  # fmt: skip
    assert response.status_code == 302
    entry = AuditEntry.objects.get(subject="quota")
    assert entry.actor == admin_client.user and entry.team == maps
    assert (entry.before["nominal"], entry.after["nominal"]) == (8, 12)
    assert (entry.before["borrowing_limit"], entry.after["borrowing_limit"]) == (8, 4)
    assert "nominal 8 GPUs -> 12 GPUs" in entry.summary


def test_it_writes_a_quota_edits_figures_in_their_units_and_unset_ones_in_their_words(admin_client, maps):
    quota = Quota.objects.create(team=maps, resource="cpu", nominal=64000, lending_limit=16000)
    url = f"/admin/tenants/quota/{quota.pk}/change/"
    admin_client.post(url, {
        "team": maps.pk, "resource": "cpu", "nominal": 32000, "borrowing_limit": 500, "lending_limit": "",
        "max_per_replica": 8000, "default_per_replica": "", "loaded": opened(admin_client, url)["loaded"],
    })  # fmt: skip
    summary = AuditEntry.objects.get(subject="quota").summary
    assert summary.startswith("Quota maps cpu: 32 CPUs changed: ")
    assert "nominal 64 CPUs -> 32 CPUs" in summary and "borrowing_limit no limit -> 500m CPU" in summary
    assert "lending_limit 16 CPUs -> all unused" in summary and "max_per_replica no limit -> 8 CPUs" in summary
    assert "64000" not in summary and "None" not in summary


def test_it_writes_a_memory_quota_in_binary_units(admin_client, maps):
    quota = Quota.objects.create(team=maps, resource="memory", nominal=512 * 1024**3, default_per_replica=4 * 1024**3)
    url = f"/admin/tenants/quota/{quota.pk}/change/"
    admin_client.post(url, {
        "team": maps.pk, "resource": "memory", "nominal": 256 * 1024**3, "borrowing_limit": "", "lending_limit": "",
        "max_per_replica": "", "default_per_replica": "", "loaded": opened(admin_client, url)["loaded"],
    })  # fmt: skip
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "nominal 512 GiB -> 256 GiB" in summary and "default_per_replica 4 GiB -> none" in summary


def test_it_names_a_quota_added_or_deleted_by_its_nominal_in_its_unit(admin_client, maps):
    admin_client.post("/admin/tenants/quota/add/", {
        "team": maps.pk, "resource": "cpu", "nominal": 64000, "borrowing_limit": "", "lending_limit": "",
        "max_per_replica": "", "default_per_replica": "",
    })  # fmt: skip
    quota = Quota.objects.get(team=maps, resource="cpu")
    admin_client.post(f"/admin/tenants/quota/{quota.pk}/delete/", {"post": "yes"})
    added, deleted = AuditEntry.objects.filter(subject="quota").order_by("id")
    assert (added.summary, deleted.summary) == ("Quota maps cpu: 64 CPUs added.", "Quota maps cpu: 64 CPUs deleted.")


def test_it_writes_a_teams_sweep_cap_in_gpus(maps):
    before = snapshot(maps)
    maps.sweep_gpu_cap = 4
    maps.save()
    entry = record(actor=None, obj=maps, before=before, after=snapshot(maps), verb="changed")
    assert entry.summary == "Team maps changed: sweep_gpu_cap 8 GPUs -> 4 GPUs."


def test_it_writes_other_values_as_before(maps):
    before = snapshot(maps)
    maps.checkpoint_claim, maps.weight = "ckpt", 2.0
    maps.save()
    entry = record(actor=None, obj=maps, before=before, after=snapshot(maps), verb="changed")
    assert entry.summary == "Team maps changed: checkpoint_claim '' -> 'ckpt', weight 1.0 -> 2.0."


def test_it_names_a_row_a_change_points_to_where_the_entry_keeps_its_id(maps, tiers):
    before = snapshot(maps)
    maps.default_tier = tiers["production"]
    maps.save()
    after = snapshot(maps)
    entry = record(actor=None, obj=maps, before=before, after=after, verb="changed")
    assert entry.summary == "Team maps changed: default_tier 'standard' -> 'production'."
    assert (entry.before["default_tier"], entry.after["default_tier"]) == (tiers["standard"].pk, tiers["production"].pk)


def test_it_says_a_row_pointed_to_that_was_deleted_since_by_its_id(maps, tiers):
    before = {**snapshot(maps), "sweep_tier": 999_999}
    entry = record(actor=None, obj=maps, before=before, after=snapshot(maps), verb="changed")
    assert "sweep_tier #999999 (since deleted) -> " in entry.summary


def test_it_records_a_tier_edit(admin_client, tiers):
    tier = tiers["experiment"]
    url = f"/admin/tenants/prioritytier/{tier.pk}/change/"
    admin_client.post(url, {
        "name": "experiment", "value": 20, "preemptible": "on", "grace_period": 10, "description": "",
        "row_loaded": opened(admin_client, url)["row_loaded"],
    })  # fmt: skip
    entry = AuditEntry.objects.get(subject="prioritytier")
    assert (entry.before["value"], entry.after["value"]) == (10, 20)


def test_it_records_a_membership_added_and_deleted(admin_client, maps, outsider):
    admin_client.post("/admin/tenants/membership/add/", {"user": outsider.pk, "team": maps.pk, "role": "lead"})
    membership = Membership.objects.get(user=outsider, team=maps)
    admin_client.post(f"/admin/tenants/membership/{membership.pk}/delete/", {"post": "yes"})
    added, deleted = AuditEntry.objects.filter(subject="membership").order_by("at", "id")
    assert added.after["role"] == "lead" and added.before == {} and added.team == maps
    assert deleted.before["role"] == "lead" and deleted.after == {}
    assert "deleted" in deleted.summary


def test_it_records_a_token_revocation_without_its_digest(admin_client, maps):
    token = ApiToken.objects.create(name="ci", team=maps, digest="d" * 64, prefix="gw_abcdefg")
    url = f"/admin/tenants/apitoken/{token.pk}/change/"
    admin_client.post(url, {
        "name": "ci", "team": maps.pk, "user": "", "max_tier": "", "revoked_at_0": "2026-01-01", "revoked_at_1": "00:00:00",
        "row_loaded": opened(admin_client, url)["row_loaded"],
    })  # fmt: skip
    entry = AuditEntry.objects.get(subject="apitoken")
    assert entry.before["revoked_at"] is None and entry.after["revoked_at"]
    assert "digest" not in entry.before and "digest" not in entry.after


def test_audit_entries_are_read_only_in_the_admin(admin_client, maps):
    entry = AuditEntry.objects.create(subject="quota", team=maps, summary="x")
    assert admin_client.get("/admin/tenants/auditentry/").status_code == 200
    assert admin_client.post(f"/admin/tenants/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403


@pytest.fixture
def triggered(monkeypatch):
    """Records the cycles asked for."""
    calls = []
    names = {triggers.ADMISSION_CYCLE: "admission", triggers.SYNC_TENANTS: "tenants"}
    monkeypatch.setattr(triggers, "trigger", lambda name: calls.append(names.get(name, name)))
    return calls


def test_a_quota_edit_in_the_admin_asks_for_a_cycle_once_committed(
        admin_client, maps, triggered, django_capture_on_commit_callbacks):
    quota = Quota.objects.get(team=maps, resource="gpu")
    url = f"/admin/tenants/quota/{quota.pk}/change/"
    loaded = opened(admin_client, url)["loaded"]
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(url, {
            "team": maps.pk, "resource": "gpu", "nominal": 12, "borrowing_limit": 4, "lending_limit": "",
            "max_per_replica": 8, "default_per_replica": "", "loaded": loaded,
        })  # fmt: skip
    assert Quota.objects.get(pk=quota.pk).nominal == 12
    assert "admission" in triggered and "tenants" in triggered


def test_a_membership_edit_in_the_admin_asks_for_no_cycle(
        admin_client, maps, outsider, triggered, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post("/admin/tenants/membership/add/", {"user": outsider.pk, "team": maps.pk, "role": "lead"})
    assert Membership.objects.filter(user=outsider, team=maps).exists()
    assert triggered == []
