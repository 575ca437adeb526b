"""A victim the cluster keeps refusing to stop runs on, counted in its team's quota all along.

Gangway's own victim whose suspend and delete an admission webhook both refuse keeps its pods: the job it was
preempted for is requeued, and the victim stays preempting, asked to stop at every reconcile. Meanwhile it
counts as a running job of its team, so nothing of that team is admitted into the quota it still holds (the
job it was preempted for included). Once the cluster has refused to stop it for ADMISSION_TIMEOUT it goes back
to running, its timeline saying why, and a later cycle may preempt it again. A victim whose stop only lands
late (a lost suspend, sent again by reconcile) is requeued as before, however late.

On PostgreSQL and the simulated cluster, behind a webhook that refuses to stop the jobs it protects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from jobs.codes import Because
from jobs.models import Job, JobEvent
from scheduling.cluster.base import ClusterError, ClusterJob, ClusterUnavailable
from scheduling.cluster.faulty import Fault, FaultyCluster
from scheduling.invariants import broken_promises, out_of_line
from scheduling.loop import admission_cycle
from scheduling.models import SimJob
from scheduling.reconcile import reconcile

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]
DENIED = 'admission webhook "protect.example.com" denied the request: jobs labelled example.com/protected stay'


@dataclass
class Webhook(FaultyCluster):
    """The cluster behind an admission webhook that refuses to suspend or delete the objects it protects
    (by name); every other call passes, but for the faults injected."""

    protected: set[str] = field(default_factory=set)

    def suspend_job(self, job: ClusterJob) -> None:
        if job.name in self.protected:
            raise ClusterError(f"suspend TFJob {job.namespace}/{job.name}: 403 Forbidden: {DENIED}")
        return super().suspend_job(job)

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        if name in self.protected:
            raise ClusterError(f"delete {kind} {namespace}/{name}: 403 Forbidden: {DENIED}")
        return super().delete_job(namespace, name, kind)


def _object_name(job: Job) -> str:
    return SimJob.objects.get(job_id=job.pk).name


def _promises(cluster) -> list[str]:
    return broken_promises(cluster.nodes(), cluster.job_statuses())


@pytest.fixture
def low(maps, submit, cluster, clock):
    """maps may use 8 GPUs (nominal 8, no borrowing) and runs them all: job `low`, experiment tier, on one
    of the two nodes of 8, past the thrash guard."""
    maps.quotas.filter(resource="gpu").update(borrowing_limit=0)
    job = submit(name="low", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 7200})
    admission_cycle(cluster=cluster, now=clock())
    reconcile(cluster=cluster, now=clock())
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    clock.tick(601)
    return job


@pytest.fixture
def refused(low, submit, cluster, clock):
    """Production work of maps preempts `low`, whose stop the webhook refuses; returns (webhook, urgent)."""
    webhook = Webhook(cluster, protected={_object_name(low)})
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    result = admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db(), urgent.refresh_from_db()
    assert result.preempted == 1 and low.state == Job.State.PREEMPTING
    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    return webhook, urgent


def test_while_the_cluster_refuses_to_stop_it_its_team_is_not_admitted_into_the_quota_it_holds(
        refused, low, cluster, clock):  # fmt: skip
    webhook, urgent = refused
    clock.tick(31)  # past the job's backoff; the other node is free

    reconcile(cluster=webhook, now=clock())
    result = admission_cycle(cluster=webhook, now=clock())

    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and not SimJob.objects.get(job_id=low.pk).suspended
    assert urgent.state == Job.State.QUEUED and not SimJob.objects.filter(job_id=urgent.pk).exists()
    assert next(team for team in result.gpu_usage if team["team"] == "maps")["used"] == 8
    # Never a victim again while it is being stopped (RunningJob.stopping): nobody else to preempt, the job waits.
    assert urgent.reason.startswith("Waiting for quota: needs 8 GPUs; team maps uses 8 of its 8 nominal and may "
                                    "borrow only 0 more (its borrowing limit is 0); it starts when jobs of the team "
                                    f"free 8 GPUs. Job low (#{low.pk}), being preempted, still holds 8 GPUs")  # fmt: skip
    assert low.preemption_count == 1
    assert low.events.filter(code=Because.STOP_REFUSED).count() == 1, "said once, however often it is asked"
    assert _promises(cluster) == []


def test_refused_for_the_admission_timeout_it_runs_on_saying_why_and_counts_as_any_running_job(
        refused, low, cluster, clock):  # fmt: skip
    webhook, _ = refused
    clock.tick(599)
    reconcile(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING, "within the bound it is asked to stop again"

    clock.tick(2)
    result = reconcile(cluster=webhook, now=clock())

    low.refresh_from_db()
    assert result.changed == 1 and low.state == Job.State.RUNNING and low.not_before is None
    event = low.events.last()
    assert (event.kind, event.from_state, event.to_state, event.code) == (
        JobEvent.Kind.NOTE, Job.State.PREEMPTING, Job.State.RUNNING, Because.RUNS_ON)
    assert event.message == (
        f"Runs on: the cluster refused to stop it for 601 s (delete TFJob maps/{_object_name(low)}: 403 Forbidden: "
        f"{DENIED}), so its preemption is given up; it runs as any job of team maps does, counted in its quota, "
        "and a later cycle may preempt it again.")
    assert low.placement and low.started_at is not None, "it kept its run"
    assert _promises(cluster) == [] and out_of_line(cluster.job_statuses()) == []


def test_a_later_cycle_may_preempt_it_again_and_nothing_is_over_admitted_meanwhile(refused, low, cluster, clock):
    webhook, urgent = refused
    for _ in range(25):  # about an hour, in strides of 140 s
        clock.tick(140)
        reconcile(cluster=webhook, now=clock())
        admission_cycle(cluster=webhook, now=clock())
        assert _promises(cluster) == []
        assert not SimJob.objects.filter(job_id=urgent.pk).exists(), "never started while low runs"

    low.refresh_from_db()
    assert low.events.filter(code=Because.RUNS_ON).count() >= 2, "given up on, preempted again, given up on"
    # Each time it ran on it was never preempted: that preemption is no longer counted.
    preempted = low.events.filter(kind=JobEvent.Kind.PREEMPTED).count()
    assert preempted >= 3 and low.preemption_count == preempted - low.events.filter(code=Because.RUNS_ON).count()
    assert not SimJob.objects.get(job_id=low.pk).suspended
    assert Job.objects.get(pk=urgent.pk).state == Job.State.QUEUED


def test_a_victim_whose_stop_only_lands_late_is_requeued_as_before_beside_one_that_runs_on(
        maps, submit, cluster, clock):  # fmt: skip
    """Two victims of one job: the webhook refuses to stop the first; the suspend of the second is lost, and
    sent again by a reconcile that comes past ADMISSION_TIMEOUT."""
    maps.quotas.filter(resource="gpu").update(nominal=16, borrowing_limit=0)
    first, second = (submit(name=name, tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 7200})
                     for name in ("first", "second"))  # fmt: skip
    admission_cycle(cluster=cluster, now=clock())
    reconcile(cluster=cluster, now=clock())
    clock.tick(601)
    urgent = submit(name="urgent", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], simulate={"duration": 600})
    webhook = Webhook(cluster, protected={_object_name(first)},
                      faults=[Fault("suspend_job", "before", ClusterUnavailable)])  # fmt: skip
    admission_cycle(cluster=webhook, now=clock())
    assert set(Job.objects.filter(state=Job.State.PREEMPTING).values_list("name", flat=True)) == {"first", "second"}

    clock.tick(700)
    reconcile(cluster=webhook, now=clock())
    clock.tick(5)
    reconcile(cluster=webhook, now=clock())

    first.refresh_from_db(), second.refresh_from_db(), urgent.refresh_from_db()
    assert first.state == Job.State.RUNNING and first.events.filter(code=Because.RUNS_ON).exists()
    assert second.state == Job.State.QUEUED and second.not_before is None
    assert list(second.events.values_list("kind", flat=True))[-2:] == [JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED]
    assert not second.events.filter(code__in=(Because.RUNS_ON, Because.STOP_REFUSED)).exists()
    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    assert _promises(cluster) == []


def test_the_invariants_count_a_victim_the_cluster_refuses_to_stop_in_its_team_and_on_its_node(
        refused, low, cluster):  # fmt: skip
    _, urgent = refused
    assert _promises(cluster) == []
    # Were the job it was preempted for admitted beside it, on its node, the team would hold twice its quota.
    Job.objects.filter(pk=urgent.pk).update(state=Job.State.ADMITTED, placement=low.placement)
    assert _promises(cluster) == [f"node {low.placement[0]} holds 16 GPUs of admitted jobs, above its 8",
                                  "team maps holds 16 GPUs, above 8 + 0"]  # fmt: skip


def test_the_job_it_was_preempted_for_takes_another_victim_instead(maps, submit, cluster, clock):
    maps.quotas.filter(resource="gpu").update(nominal=16, borrowing_limit=0)
    first = submit(name="first", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 72000})
    second = submit(name="second", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 72000})
    admission_cycle(cluster=cluster, now=clock())
    reconcile(cluster=cluster, now=clock())
    clock.tick(601)
    webhook = Webhook(cluster, protected={_object_name(first)})
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=webhook, now=clock())  # takes `first` (least unsaved work), whose stop is refused
    first.refresh_from_db()
    assert first.state == Job.State.PREEMPTING

    for _ in range(3):  # past the first backoff; `first` is never taken again
        clock.tick(140)
        reconcile(cluster=webhook, now=clock())
        admission_cycle(cluster=webhook, now=clock())
        assert _promises(cluster) == []

    first.refresh_from_db(), second.refresh_from_db(), urgent.refresh_from_db()
    assert urgent.state in (Job.State.ADMITTED, Job.State.RUNNING)
    assert second.state == Job.State.QUEUED and second.preemption_count == 1
    assert first.state == Job.State.PREEMPTING and first.preemption_count == 1
