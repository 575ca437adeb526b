"""GPU types as data: adding, changing and deleting them keeps every team's GPU quota readable
(untyped `gpu` without types, `gpu:<type>` with), is recorded, and asks for a cycle."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from jobs.models import Job
from portal import triggers
from tenants.models import AuditEntry, GpuType, Quota
from tenants.services import (
    GpuTypeRefused, gpu_type_create, gpu_type_delete, gpu_type_update, quota_update,
)

A100 = {"name": "a100", "value": "NVIDIA-A100-SXM4-80GB", "order": 2, "description": "80 GB"}
L4 = {"name": "l4", "value": "NVIDIA-L4", "order": 1}


@pytest.fixture
def triggered(monkeypatch):
    calls = []
    monkeypatch.setattr(triggers, "trigger", calls.append)
    return calls


def resources(team) -> dict:
    return {q.resource: (q.nominal, q.borrowing_limit, q.max_per_replica) for q in team.quotas.all()}


def test_the_first_type_turns_every_teams_gpu_quota_into_its_own(maps, vision, staff, triggered,
                                                                  django_capture_on_commit_callbacks):
    Quota.objects.create(team=maps, resource="cpu", nominal=64000)
    with django_capture_on_commit_callbacks(execute=True):
        gpu_type_create(actor=staff, **A100)
    assert resources(maps) == {"gpu:a100": (8, 8, 8), "cpu": (64000, None, None)}
    assert resources(vision) == {"gpu:a100": (8, 8, 8)}
    entry = AuditEntry.objects.get(team=maps, subject="quota")
    assert entry.actor == staff and "gpu" in entry.before and "gpu:a100" in entry.after
    assert entry.summary == ("Quota of team maps: its gpu quota became gpu:a100 "
                             "(the cluster's first GPU type, a100, was added).")
    assert AuditEntry.objects.get(subject="gputype").summary == "GPU type a100 added."
    assert triggers.ADMISSION_CYCLE in triggered and triggers.SYNC_TENANTS in triggered


def test_a_second_type_leaves_the_quotas_as_they_are(maps, staff):
    gpu_type_create(actor=staff, **A100)
    gpu_type_create(actor=staff, **L4)
    assert resources(maps) == {"gpu:a100": (8, 8, 8)}
    assert AuditEntry.objects.filter(subject="quota").count() == 1


def test_bad_fields_are_refused_and_nothing_changes(maps, staff):
    with pytest.raises(ValidationError) as refused:
        gpu_type_create(actor=staff, name="A100!", value="x")
    assert "name" in refused.value.message_dict
    assert not GpuType.objects.exists() and resources(maps) == {"gpu": (8, 8, 8)}
    assert not AuditEntry.objects.exists()


def test_a_team_with_both_a_gpu_and_a_typed_quota_stops_the_first_type(maps, staff):
    Quota.objects.create(team=maps, resource="gpu:a100", nominal=2)
    with pytest.raises(GpuTypeRefused, match="Team maps already has both a gpu and a gpu:a100 quota"):
        gpu_type_create(actor=staff, **A100)
    assert not GpuType.objects.exists() and set(resources(maps)) == {"gpu", "gpu:a100"}


def test_deleting_a_type_that_quotas_name_is_refused_naming_the_teams(gpu_types, staff):
    with pytest.raises(GpuTypeRefused) as refused:
        gpu_type_delete(gpu_type=gpu_types["a100"], actor=staff)
    assert str(refused.value) == (
        "GPU type a100 cannot be deleted while the gpu:a100 quota of teams maps and vision name it; "
        "remove those quotas on the teams' quota pages and let those jobs end first.")
    assert GpuType.objects.filter(name="a100").exists()


def test_deleting_a_type_that_open_jobs_name_is_refused_naming_the_jobs(gpu_types, maps, vision, submit, staff):
    for team in (maps, vision):
        quota_update(team=team, quotas={"gpu:a100": None})
    job = submit()
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100", "l4"])
    with pytest.raises(GpuTypeRefused, match=rf"while 1 queued or running job \(#{job.pk}\) name it"):
        gpu_type_delete(gpu_type=gpu_types["a100"], actor=staff)
    Job.objects.filter(pk=job.pk).update(state=Job.State.SUCCEEDED)
    gpu_type_delete(gpu_type=gpu_types["a100"], actor=staff)
    assert list(GpuType.objects.values_list("name", flat=True)) == ["l4"]
    assert AuditEntry.objects.get(subject="gputype").summary == "GPU type a100 deleted."


def test_a_running_job_given_the_type_also_stops_its_deletion(gpu_types, maps, vision, submit, staff):
    for team in (maps, vision):
        quota_update(team=team, quotas={"gpu:l4": None})
    job = submit()
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, assigned_gpu_type="l4")
    with pytest.raises(GpuTypeRefused, match=rf"\(#{job.pk}\)"):
        gpu_type_delete(gpu_type=gpu_types["l4"], actor=staff)


def test_deleting_the_last_type_turns_its_quotas_back_into_gpu(maps, staff):
    a100 = gpu_type_create(actor=staff, **A100)
    gpu_type_delete(gpu_type=a100, actor=staff)
    assert not GpuType.objects.exists()
    assert resources(maps) == {"gpu": (8, 8, 8)}
    assert AuditEntry.objects.filter(team=maps, subject="quota").first().summary == (
        "Quota of team maps: its gpu:a100 quota became gpu (the cluster's last GPU type, a100, was deleted).")


def test_renaming_a_type_renames_its_quotas(gpu_types, maps, staff):
    gpu_type_update(gpu_type=gpu_types["a100"], actor=staff, name="a100-80gb")
    assert set(resources(maps)) == {"gpu:l4", "gpu:a100-80gb"}
    change = AuditEntry.objects.get(subject="gputype")
    assert (change.before["name"], change.after["name"]) == ("a100", "a100-80gb")
    assert "its gpu:a100 quota became gpu:a100-80gb (GPU type a100 was renamed a100-80gb)" in (
        AuditEntry.objects.filter(team=maps, subject="quota").first().summary)


def test_renaming_a_type_open_jobs_name_is_refused(gpu_types, submit, staff):
    job = submit()
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    with pytest.raises(GpuTypeRefused) as refused:
        gpu_type_update(gpu_type=gpu_types["a100"], actor=staff, name="a100-80gb")
    assert str(refused.value) == (f"GPU type a100 cannot be renamed a100-80gb while 1 queued or running job "
                                  f"(#{job.pk}) ask for it or run on it; rename it once they have ended.")
    assert GpuType.objects.filter(name="a100").exists() and not AuditEntry.objects.exists()


def test_other_fields_change_while_jobs_name_the_type(gpu_types, submit, staff):
    job = submit()
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    gpu_type_update(gpu_type=gpu_types["a100"], actor=staff, order=0, description="80 GB HBM2e")
    assert GpuType.objects.get(name="a100").order == 0


def test_a_quota_of_an_unknown_type_is_refused(gpu_types, maps):
    with pytest.raises(ValueError, match="Unknown resource 'gpu:h100'; the resources are gpu:l4, gpu:a100, cpu, memory."):
        quota_update(team=maps, quotas={"gpu:h100": {"nominal": 4}})
    with pytest.raises(ValueError, match="Unknown resource 'gpu'"):
        quota_update(team=maps, quotas={"gpu": {"nominal": 4}})


def test_a_new_typed_quota_keeps_the_teams_per_replica_gpu_limit(gpu_types, maps, staff):
    quota_update(team=maps, quotas={"gpu:l4": None})
    Quota.objects.filter(team=maps, resource="gpu:a100").update(max_per_replica=4)
    quota_update(team=maps, quotas={"gpu:l4": {"nominal": 2}}, actor=staff)
    assert resources(maps)["gpu:l4"] == (2, None, 4)
