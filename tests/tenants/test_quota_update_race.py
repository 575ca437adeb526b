"""Two saves from one stale basis at the same moment (real PostgreSQL, two connections): the team's row lock
orders them, so the second compares against the first one's figures and is refused; neither is lost."""

from __future__ import annotations

import time

import pytest

from tenants import services
from tenants.models import AuditEntry, Quota
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged
from tenants.services import quota_update, quota_values
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_saves_from_the_same_page_at_once_save_one_and_refuse_the_other(maps, monkeypatch):
    read = QuotaAsRead.now(maps, quota_values(maps))
    compare = services.changes_since

    def slow_compare(*args):
        found = compare(*args)
        time.sleep(0.3)  # both saves would sit between their check and their write at once, but for the lock
        return found

    monkeypatch.setattr(services, "changes_since", slow_compare)
    monkeypatch.setattr(services, "admission_inputs_changed", lambda: None)
    outcomes: dict[int, str] = {}

    def save(nominal: int):
        def save_it() -> None:
            try:
                quota_update(team=maps, quotas={"gpu": {"nominal": nominal, "borrowing_limit": 8}}, based_on=read)
                outcomes[nominal] = "saved"
            except QuotaChanged:
                outcomes[nominal] = "refused"
        return save_it

    assert run_together(save(4), save(6), timeout=30) == []
    assert sorted(outcomes.values()) == ["refused", "saved"]
    saved = next(nominal for nominal, outcome in outcomes.items() if outcome == "saved")
    assert Quota.objects.get(team=maps, resource="gpu").nominal == saved
    assert AuditEntry.objects.filter(subject="quota").count() == 1
