"""The admission loop on the simulated cluster: jobs move by themselves, every decision recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobEvent
from jobs.services import job_cancel
from scheduling.cluster.base import ClusterUnavailable
from scheduling.models import ClusterNode, Cycle, CycleTotals, SimJob, UsageSample
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile


def states(*jobs) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


def kinds(job) -> list[str]:
    return list(JobEvent.objects.filter(job=job).values_list("kind", flat=True))


def test_a_job_goes_from_queued_to_succeeded_by_itself(submit, cycle, clock):
    job = submit(simulate={"duration": 60})
    assert cycle().admitted == 1
    assert states(job) == ["admitted"]
    cycle()
    assert states(job) == ["running"]
    clock.tick(61)
    cycle()
    assert states(job) == ["succeeded"]
    assert kinds(job) == ["submitted", "admitted", "running", "succeeded"]
    assert Job.objects.get(pk=job.pk).placement == ["node-01", "node-01"]


def test_a_failing_job_ends_failed_with_the_clusters_message(submit, cycle, clock):
    job = submit(simulate={"duration": 5, "fail": True})
    cycle()
    cycle()
    clock.tick(10)
    cycle()
    job.refresh_from_db()
    assert job.state == "failed"
    assert "exited with code 1" in job.events.last().message


def test_a_job_past_its_max_runtime_fails_saying_its_deadline_was_exceeded(submit, cycle, clock):
    job = submit(max_runtime=3, simulate={"duration": 136})
    cycle()
    cycle()
    assert states(job) == ["running"]
    clock.tick(10)
    cycle()
    job.refresh_from_db()
    assert job.state == "failed"
    assert job.events.last().message == (
        f"Failed: DeadlineExceeded: TFJob maps/{job.name}-g{job.pk} was active longer than its activeDeadlineSeconds "
        "(3 s, its max runtime); its replicas were stopped.")  # fmt: skip


def test_a_waiting_job_gets_a_reason_positions_and_an_eta(submit, cycle):
    big = submit(name="big", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], max_runtime=3600)
    waiting = submit(name="waits", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    waiting.refresh_from_db()
    assert states(big) == ["admitted"]
    assert waiting.position == 1 and waiting.team_position == 1
    assert waiting.reason and waiting.reason_code
    assert waiting.eta is not None
    assert JobEvent.objects.filter(job=waiting, kind="waiting").count() == 1
    cycle()
    assert JobEvent.objects.filter(job=waiting, kind="waiting").count() == 1, "an unchanged reason is not repeated"


def test_it_rejects_what_can_never_fit_at_submission_once_nodes_are_known(submit, cycle):
    from jobs.services import NeverFits

    cycle()  # the first cycle records the nodes
    with pytest.raises(NeverFits, match="GPU"):
        submit(replicas=[{"role": "Worker", "count": 3, "gpu": 8}])  # 24 GPUs > 16 the team may ever hold
    assert Job.objects.count() == 0


def test_submission_without_the_policys_judge_fails_loudly_instead_of_admitting(submit, cycle, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from jobs import services

    cycle()
    monkeypatch.setattr(services, "_fit_judge", {})
    with pytest.raises(ImproperlyConfigured, match="R10"):
        submit(replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    assert Job.objects.count() == 0


def test_the_first_cycle_rejects_what_was_submitted_before_nodes_were_known(submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 3, "gpu": 8}])
    assert cycle().rejected == 1
    job.refresh_from_db()
    assert job.state == "rejected" and "GPU" in job.reason


def test_preemption_requeues_the_victim_keeping_its_queue_time_and_attempt(submit, cycle, clock, vision, outsider):
    borrower = submit(name="borrower", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])  # all 16: 8 borrowed
    cycle()
    cycle()
    queued_at = Job.objects.get(pk=borrower.pk).queued_at
    clock.tick(5)
    owner_job = submit(team=vision, user=outsider, name="reclaim", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    result = cycle()
    assert result.preempted == 1 and result.admitted == 1
    assert states(borrower, owner_job) == ["preempting", "admitted"]
    cycle()  # the simulated cluster suspended it at once: reconcile requeues it
    borrower.refresh_from_db()
    assert borrower.state == "queued"
    assert borrower.queued_at == queued_at
    assert borrower.attempt == 2 and borrower.preemption_count == 1
    preempted = JobEvent.objects.get(job=borrower, kind="preempted")
    assert "vision" in preempted.message and "borrowed" in preempted.message
    assert preempted.code == "reclaimed"


def test_a_higher_tier_of_the_same_team_preempts_under_its_own_code(submit, cycle, clock):
    whole_node = [{"role": "Worker", "count": 1, "gpu": 8}]
    low = [submit(name=f"low-{k}", tier="experiment", replicas=whole_node, simulate={"duration": 10_000})
           for k in range(2)]
    cycle()
    cycle()
    assert states(*low) == ["running", "running"]  # maps: 8 nominal + 8 borrowed
    clock.tick(601)  # past the thrash guard
    submit(name="high", tier="standard", replicas=whole_node)
    assert cycle().preempted == 1
    event = JobEvent.objects.get(kind="preempted")
    assert event.code == "preempted" and event.job_id in {job.pk for job in low}
    assert "same team" in event.message


def test_the_cluster_unreachable_keeps_jobs_queued_with_that_reason_and_recovers(submit, cycle, cluster):
    class Down:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise ClusterUnavailable("connection refused")

            return fail

    job = submit()
    result = cycle(on=Down())
    assert result.error
    job.refresh_from_db()
    assert job.state == "queued"
    assert job.reason_code == "cluster_unreachable" and job.reason.startswith("The cluster cannot be reached")
    assert "connection refused" not in job.reason, "people read the reason: it names no address or error"
    latest = Cycle.objects.latest()
    assert latest.cluster_reachable is False and "connection refused" in latest.error, "operators read the row"
    assert cycle().admitted == 1
    assert states(job) == ["admitted"]


def test_a_job_running_without_an_admission_whose_suspend_is_refused_is_deleted(submit, cluster, clock):
    """Left running while the cluster refuses the suspend, it would hold its room and its team's quota for as long
    as that lasts. It is deleted, and created again when admitted, as a victim is."""
    from scheduling.cluster.base import ClusterError
    from scheduling.cluster.faulty import Fault, FaultyCluster
    from scheduling.snapshot import to_cluster_job

    job = submit()
    cluster.create_job(to_cluster_job(job, placement=("node-01", "node-01")))
    refusing = FaultyCluster(cluster, faults=[Fault("suspend_job", "before", ClusterError)])

    result = reconcile(cluster=refusing, now=clock())

    job.refresh_from_db()
    assert (result.suspended, result.deleted) == (0, 1)
    assert job.state == "queued" and not SimJob.objects.filter(job_id=job.pk).exists()
    assert job.events.filter(code="stop_refused", message__contains="was deleted instead").exists()
    admission_cycle(cluster=cluster, now=clock())
    assert SimJob.objects.filter(job_id=job.pk, suspended=False).count() == 1


def test_a_job_running_without_an_admission_is_suspended_not_adopted(submit, cluster, clock):
    """The cluster runs a job the database has queued (an older version's crash between create and
    commit): adopting it would skip quota and room, so it is stopped, and resumes when admitted."""
    from scheduling.snapshot import to_cluster_job

    job = submit()
    cluster.create_job(to_cluster_job(job, placement=("node-01", "node-01")))
    result = reconcile(cluster=cluster, now=clock())
    assert result.suspended == 1
    job.refresh_from_db()
    assert job.state == "queued" and job.events.last().code == "not_admitted"
    assert SimJob.objects.get(job_id=job.pk).suspended is True
    admission_cycle(cluster=cluster, now=clock())
    assert SimJob.objects.filter(job_id=job.pk).count() == 1 and SimJob.objects.get(job_id=job.pk).suspended is False


def test_an_admitted_job_missing_from_the_cluster_is_created_again(submit, cycle, cluster, clock):
    job = submit()
    cycle()
    SimJob.objects.all().delete()  # lost, e.g. deleted by hand
    assert reconcile(cluster=cluster, now=clock()).created == 1
    assert SimJob.objects.filter(job_id=job.pk).count() == 1


def test_orphans_in_the_cluster_are_deleted(submit, cycle, cluster, clock):
    job = submit()
    cycle()
    Job.objects.filter(pk=job.pk).delete()
    assert reconcile(cluster=cluster, now=clock()).deleted == 1
    assert not SimJob.objects.exists()


@override_settings(ADMISSION_TIMEOUT=60)
def test_a_stuck_admission_is_evicted_and_backs_off(submit, cycle, clock):
    job = submit()
    cycle()
    SimJob.objects.filter(job_id=job.pk).update(started_at=None, nodes=[])  # its pods never start
    from scheduling.models import SimNode

    SimNode.objects.update(gpu=0)  # e.g. the nodes it was meant for filled up
    clock.tick(61)
    cycle()
    job.refresh_from_db()
    assert job.state == "queued" and job.attempt == 2
    assert job.not_before is not None and job.reason_code == "backoff"
    assert JobEvent.objects.filter(job=job, kind="evicted").exists()


def test_cancelling_a_running_job_stops_it_in_the_cluster(submit, cycle, owner):
    job = submit()
    cycle()
    cycle()
    job_cancel(job=Job.objects.get(pk=job.pk), actor=owner)
    cycle()
    assert states(job) == ["cancelled"]
    assert not SimJob.objects.filter(job_id=job.pk).exists()


def test_cancelling_a_queued_job_is_immediate(submit, owner):
    job = submit()
    job_cancel(job=job, actor=owner)
    assert states(job) == ["cancelled"]


def test_the_cycle_mirrors_nodes_and_records_itself(submit, cycle):
    submit()
    cycle()
    assert list(ClusterNode.objects.values_list("name", "gpu")) == [("node-01", 8), ("node-02", 8)]
    assert Cycle.objects.latest().admitted == 1


def test_the_cycle_prunes_cycle_rows_past_the_retention(cycle, clock):
    cycle()
    clock.tick(604800 + 60)  # CYCLE_RETENTION's default, 7 days
    cycle()
    assert Cycle.objects.count() == 1
    assert CycleTotals.objects.get().cycles == 1


@override_settings(CYCLE_RETENTION=2 * 86400)
def test_cycle_rows_and_usage_samples_are_kept_as_long_as_cycle_retention_says(submit, cycle, clock):
    submit()
    started = []
    for _ in range(3):
        started.append(clock())
        cycle()
        clock.tick(86400 + 60)
    # The third cycle ran 2 days and 2 min after the first, and 1 day and 1 min after the second.
    assert list(Cycle.objects.order_by("started_at").values_list("started_at", flat=True)) == started[1:]
    assert sorted(set(UsageSample.objects.values_list("at", flat=True))) == started[1:]
    assert CycleTotals.objects.get().cycles == 1


def test_a_running_job_found_suspended_is_resumed(submit, cycle, cluster, clock):
    """E.g. its preemption was rolled back after the cluster had suspended it: the database wins."""
    from scheduling.snapshot import to_cluster_job

    job = submit()
    cycle()
    cycle()
    cluster.suspend_job(to_cluster_job(Job.objects.get(pk=job.pk)))
    assert reconcile(cluster=cluster, now=clock()).created == 1
    assert SimJob.objects.get(job_id=job.pk).suspended is False
    assert states(job) == ["running"]


def test_a_steady_queue_costs_the_cycle_no_writes_and_a_change_is_written(submit, cycle, clock):
    """A cycle wrote and locked every waiting row, changed or not: with thousands queued it took
    seconds, and a cancel waited behind it. Now only rows whose figures changed are written."""
    for n in range(2):
        submit(name=f"run-{n}", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], max_runtime=3600,
               simulate={"duration": 3600})
    waiting = [submit(name=f"wait-{n}", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], max_runtime=600)
               for n in range(3)]
    for _ in range(2):  # admitted, then running
        cycle()
        clock.tick(5)
    with CaptureQueriesContext(connection) as steady:
        result = cycle()

    def wait_writes(queries):
        return [q["sql"] for q in queries if q["sql"].startswith('UPDATE "jobs_job"') and '"team_position"' in q["sql"]]

    assert result.waiting == 3
    assert wait_writes(steady.captured_queries) == [], "nothing changed: nothing written"
    assert all(job.reason for job in Job.objects.filter(pk__in=[w.pk for w in waiting]))
    Job.objects.filter(pk=waiting[0].pk).update(position=99)  # a figure that no longer holds
    clock.tick(5)
    with CaptureQueriesContext(connection) as changed:
        cycle()
    assert len(wait_writes(changed.captured_queries)) == 1
    assert Job.objects.get(pk=waiting[0].pk).position == 1
    eta = Job.objects.get(pk=waiting[1].pk).eta
    Job.objects.filter(pk=waiting[1].pk).update(eta=eta - timedelta(seconds=30))
    clock.tick(5)
    with CaptureQueriesContext(connection) as drifted:
        cycle()
    assert wait_writes(drifted.captured_queries) == [], "an estimate 30 s off is not written again"
    Job.objects.filter(pk=waiting[1].pk).update(eta=eta - timedelta(seconds=600))
    cycle()
    assert abs(Job.objects.get(pk=waiting[1].pk).eta - eta) < timedelta(seconds=60), "10 min off is"
