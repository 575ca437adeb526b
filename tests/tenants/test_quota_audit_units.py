"""The audit of a quota change writes each figure in its unit, as the refusal of a stale edit beside it does:
"64 CPUs", "512 GiB", "8 GPUs", and a figure not set in `tenants.limit_words`' words."""

from __future__ import annotations

import pytest

from tenants.models import AuditEntry, Quota
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged
from tenants.services import quota_update, quota_values

pytestmark = pytest.mark.django_db

GIB = 1024**3


@pytest.fixture(autouse=True)
def no_triggers(monkeypatch):
    monkeypatch.setattr("tenants.services.admission_inputs_changed", lambda: None)


def test_the_audit_writes_cpu_memory_and_gpus_in_their_units(maps):
    quota_update(team=maps, quotas={
        "gpu": {"nominal": 4, "borrowing_limit": 0, "lending_limit": None},
        "cpu": {"nominal": 64000, "borrowing_limit": 500}, "memory": {"nominal": 512 * GIB, "lending_limit": 64 * GIB},
    })  # fmt: skip
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "gpu nominal 8 GPUs -> 4 GPUs" in summary and "gpu borrowing limit 8 GPUs -> 0 GPUs" in summary
    assert "cpu nominal no quota -> 64 CPUs" in summary and "cpu borrowing limit no limit -> 500m CPU" in summary
    assert "memory nominal no quota -> 512 GiB" in summary and "memory lending limit all unused -> 64 GiB" in summary
    assert "64000" not in summary and str(512 * GIB) not in summary


def test_the_audit_writes_a_gpu_types_figures_in_gpus(gpu_types, maps):
    quota_update(team=maps, quotas={"gpu:a100": {"nominal": 1, "borrowing_limit": None}})
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "a100 GPUs nominal 4 GPUs -> 1 GPU" in summary and "a100 GPUs borrowing limit 4 GPUs -> no limit" in summary


def test_the_audit_writes_a_quota_removed_as_no_quota(maps):
    Quota.objects.create(team=maps, resource="memory", nominal=256 * GIB)
    quota_update(team=maps, quotas={"memory": None})
    assert "memory nominal 256 GiB -> no quota" in AuditEntry.objects.get(subject="quota").summary


def test_the_audit_leaves_the_weight_a_bare_figure(maps):
    quota_update(team=maps, quotas={}, weight=2.0)
    assert AuditEntry.objects.get(subject="quota").summary == "Quota of team maps: weight 1.0 -> 2.0."


def test_a_refused_edit_and_the_audit_of_the_change_it_met_read_alike(maps):
    read = QuotaAsRead.now(maps, quota_values(maps))
    quota_update(team=maps, quotas={"memory": {"nominal": 512 * GIB}})
    with pytest.raises(QuotaChanged) as refused:
        quota_update(team=maps, quotas={"cpu": {"nominal": 64000}}, based_on=read)
    summary = AuditEntry.objects.get(subject="quota").summary
    assert "memory nominal no quota -> 512 GiB" in summary
    assert "memory nominal was changed from no quota to 512 GiB by system" in str(refused.value)
    assert "your change (cpu nominal no quota -> 64 CPUs) was not saved" in str(refused.value)


def test_a_refused_edit_names_a_gpu_type_as_people_read_it_as_the_audit_does(gpu_types, maps):
    read = QuotaAsRead.now(maps, quota_values(maps))
    quota_update(team=maps, quotas={"gpu:l4": {"nominal": 2, "borrowing_limit": 4}})
    with pytest.raises(QuotaChanged) as refused:
        quota_update(team=maps, quotas={"gpu:a100": {"nominal": 6, "borrowing_limit": 4}}, based_on=read)
    assert "l4 GPUs nominal 4 GPUs -> 2 GPUs" in AuditEntry.objects.get(subject="quota").summary
    assert "l4 GPUs nominal was changed from 4 GPUs to 2 GPUs by system" in str(refused.value)
    assert "your change (a100 GPUs nominal 4 GPUs -> 6 GPUs) was not saved" in str(refused.value)
    assert "gpu:" not in str(refused.value)
