"""An adopted victim whose suspend the API server keeps refusing runs on, in its team's quota all along.

An admission webhook that cannot be dry-run lets the loop preempt a job from elsewhere, then denies its suspend;
Gangway never deletes such a job, so it keeps its pods. Its team is not admitted into the quota it still holds
meanwhile, the job it was preempted for included. Once the suspend has been refused for ADMISSION_TIMEOUT the
victim goes back to running, its timeline saying why, and the next cycle's dry run decides again whether it may
be a victim.

Over real HTTP to the fake API server, through the adapter and the loop.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.invariants import broken_promises, out_of_line
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster import busy_cluster as busy
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)
from tests.cluster.test_refused_victims import (  # noqa: F401 (victim: a fixture)
    DENIED, NO_DRY_RUN, VICTIM_PATCHES, _created, _suspended, _urgent, victim,
)

REFUSAL = f"suspend TFJob maps/bert-kubectl: 403 Forbidden: {DENIED}"


@pytest.fixture
def refused(world, fake, cluster, victim):
    """The victim preempted behind a webhook that denies its suspend (`preempted_behind`)."""
    return preempted_behind(world, fake, cluster, victim, 403, DENIED)


def preempted_behind(world, fake, cluster, victim, status: int, message: str):
    """A second node of 8 GPUs, free; production work of maps preempts the victim, whose suspend the API server
    answers with `status` and `message` once the webhook's dry run cannot be made. Returns (the job preempted
    for, the cycle's time)."""
    fake.add(busy.node("n2"))
    fake.fail(400, method="PATCH", path=VICTIM_PATCHES, times=1, message=NO_DRY_RUN)
    fake.fail(status, method="PATCH", path=VICTIM_PATCHES, times=10**6, message=message)
    urgent = _urgent(world["maps"])
    later = timezone.now() + timedelta(hours=1)  # past the thrash guard
    admission_cycle(cluster=cluster, now=later)
    victim.refresh_from_db(), urgent.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING and urgent.reason_code == Because.VICTIM_REFUSED
    return urgent, later


def test_its_team_is_not_admitted_into_the_quota_it_holds_while_the_suspend_is_refused(fake, cluster, victim, refused):
    urgent, later = refused

    reconcile(cluster=cluster, now=later + timedelta(seconds=31))
    result = admission_cycle(cluster=cluster, now=later + timedelta(seconds=31))

    victim.refresh_from_db(), urgent.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING and not _suspended(fake)
    assert urgent.state == Job.State.QUEUED and _created(fake, "maps") == [], "n2 is free, maps' quota is not"
    assert next(team for team in result.gpu_usage if team["team"] == "maps")["used"] == 8
    # Never a victim again while it is being stopped (RunningJob.stopping): nobody else to preempt, the job waits.
    assert urgent.reason.startswith("Waiting for quota: needs 8 GPUs; team maps uses 8 of its 8 nominal")
    assert victim.preemption_count == 1
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []


def test_refused_for_the_admission_timeout_it_runs_on_and_the_next_dry_run_decides_again(
        fake, cluster, victim, refused):  # fmt: skip
    urgent, later = refused
    reconcile(cluster=cluster, now=later + timedelta(seconds=599))
    victim.refresh_from_db()
    assert victim.state == Job.State.PREEMPTING

    reconcile(cluster=cluster, now=later + timedelta(seconds=601))

    victim.refresh_from_db()
    assert victim.state == Job.State.RUNNING and not _suspended(fake)
    event = victim.events.last()
    assert (event.kind, event.code) == (JobEvent.Kind.NOTE, Because.RUNS_ON)
    assert event.message == (
        f"Runs on: the cluster refused to stop it for 601 s ({REFUSAL}), so its preemption is given up; it runs "
        "as any job of team maps does, counted in its quota, and a later cycle may preempt it again.")

    fake.dry_runs.clear()
    result = admission_cycle(cluster=cluster, now=later + timedelta(seconds=700))

    victim.refresh_from_db(), urgent.refresh_from_db()
    assert ("PATCH", "/apis/kubeflow.org/v1/namespaces/maps/tfjobs/bert-kubectl") in fake.dry_runs
    # It was never stopped, so never preempted: its count went back when it ran on.
    assert result.preempted == 0 and victim.state == Job.State.RUNNING and victim.preemption_count == 0
    assert urgent.state == Job.State.QUEUED and urgent.reason.startswith(
        f"Waiting: it would preempt job bert-kubectl (#{victim.pk}), but the cluster would refuse to suspend it")
    assert _created(fake, "maps") == []
    statuses = cluster.job_statuses()
    assert broken_promises(cluster.nodes(), statuses) == [] and out_of_line(statuses) == []
