"""A quota figure left unset reads alike wherever a person reads it: a borrowing limit "no limit", a lending limit
"all unused", no nominal "no quota", as the team pages, the admin and the what-if say (`tenants.limit_words`)."""

from __future__ import annotations

import pytest

from tenants.models import AuditEntry, Quota
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged
from tenants.services import quota_update, quota_values

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_triggers(monkeypatch):
    monkeypatch.setattr("tenants.services.admission_inputs_changed", lambda: None)


def test_the_audit_says_a_lending_limit_no_longer_set_lends_all_unused(maps):
    Quota.objects.filter(team=maps, resource="gpu").update(lending_limit=4)
    quota_update(team=maps, quotas={"gpu": {"nominal": 8, "borrowing_limit": 8, "lending_limit": None}})
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "gpu lending limit 4 GPUs -> all unused" in summary and "no limit" not in summary


def test_the_audit_says_a_quota_added_had_no_quota_before(maps):
    quota_update(team=maps, quotas={"cpu": {"nominal": 64000}})
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "cpu nominal no quota -> 64 CPUs" in summary
    assert "cpu borrowing limit" not in summary and "cpu lending limit" not in summary  # unset before and after


def test_a_refused_change_words_an_unset_lending_limit_as_the_changes_it_names_do(maps):
    read = QuotaAsRead.now(maps, quota_values(maps))
    Quota.objects.filter(team=maps, resource="gpu").update(nominal=4)
    with pytest.raises(QuotaChanged) as refused:
        quota_update(team=maps, quotas={"gpu": {"nominal": 8, "borrowing_limit": 8, "lending_limit": 2}}, based_on=read)
    assert "your change (gpu lending limit all unused -> 2 GPUs) was not saved" in str(refused.value)


def test_the_quota_page_explains_an_empty_lending_limit_as_its_placeholder_says_it(login, staff, maps):
    body = login(staff).get("/teams/maps/quota/").content.decode()
    assert 'placeholder="all unused"' in body
    assert "(empty = no limit, 0 = never)" in body and "(empty = all unused)" in body and "all of it" not in body


def test_the_admin_explains_an_empty_lending_limit_as_its_list_shows_it(admin_client, maps):
    quota = Quota.objects.get(team=maps, resource="gpu")
    body = admin_client.get(f"/admin/tenants/quota/{quota.pk}/change/").content.decode()
    assert "How much unused nominal others may borrow; empty = all unused." in body and "all of it" not in body
    assert "all unused" in admin_client.get("/admin/tenants/quota/").content.decode()
