"""When a person, another worker or the cluster crosses the loop midway.

Each test sets up one crossing that once left the cluster and the database
apart: a cancel between a cycle's commit and its create, a create reported
refused that went through, a create or a suspend the cluster keeps refusing,
a victim that finishes before its suspend lands, a cancel while a cycle
plans, and a cancel while reconcile waits on a slow cluster call.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_cancel
from notifications.models import PendingEvent
from scheduling import loop
from scheduling.cluster.base import ClusterError, JobStatus, OutsidePod, Phase
from scheduling.cluster.faulty import Fault, FaultyCluster
from scheduling.invariants import out_of_line
from scheduling.loop import admission_cycle
from scheduling.locks import lease
from scheduling.models import Lease, SimClaim, SimJob
from scheduling.reconcile import RECONCILE_LOCK, reconcile
from scheduling.refusals import REFUSALS_BEFORE_FAILING
from scheduling.snapshot import build_world

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]


def running_objects() -> set[int]:
    """The Gangway jobs whose cluster object runs (or may start) in the simulated cluster."""
    return set(SimJob.objects.filter(suspended=False, finished_at__isnull=True).values_list("job_id", flat=True))


def fill_with_borrowers(submit, cycle) -> list[Job]:
    """maps runs a whole node on its nominal and one borrowed from vision; returns the two jobs."""
    jobs = [submit(name=f"borrow-{n}", replicas=WHOLE_NODE, simulate={"duration": 72000}) for n in "ab"]
    cycle()
    cycle()
    assert {job.state for job in Job.objects.all()} == {"running"}
    return jobs


class Refusing:
    """The simulated cluster, except that the calls named in `refuse` answer 403 every time."""

    def __init__(self, inner, *refuse: str):
        self.inner, self.refuse = inner, set(refuse)

    def __getattr__(self, name):
        if name in self.refuse:
            def refused(*args, **kwargs):
                raise ClusterError(f"{name}: 403 Forbidden (a webhook says no).")
            return refused
        return getattr(self.inner, name)


def test_a_cancel_between_the_commit_and_the_create_starts_nothing(submit, cluster, clock, owner, monkeypatch):
    job = submit(name="crossed", replicas=WHOLE_NODE, simulate={"duration": 7200})
    apply = loop._apply

    def cancel_first(decided, on, now):
        # The owner cancels, and a reconcile on another worker finds no object, before this worker applies.
        job_cancel(job=Job.objects.get(pk=job.pk), actor=owner)
        reconcile(cluster=cluster, now=clock())
        return apply(decided, on, now)

    monkeypatch.setattr(loop, "_apply", cancel_first)
    admission_cycle(cluster=cluster, now=clock())
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job.pk not in running_objects()
    assert out_of_line(cluster.job_statuses()) == []


def test_reconcile_stops_what_runs_for_a_job_that_ended(submit, cluster, clock, owner, cycle):
    """A create answered with a refusal that went through: the job is queued while its object runs;
    a cancel then ends it here, and reconcile deletes the object, saying so on the job."""
    job = submit(name="ghost", replicas=WHOLE_NODE, simulate={"duration": 7200})
    admission_cycle(cluster=FaultyCluster(cluster, faults=[Fault("create_job", "after", ClusterError)]), now=clock())
    job.refresh_from_db()
    assert job.state == "queued" and job.pk in running_objects()
    job_cancel(job=job, actor=owner)
    clock.tick(5)
    result = reconcile(cluster=cluster, now=clock())
    assert result.deleted == 1 and job.pk not in running_objects()
    assert out_of_line(cluster.job_statuses()) == []
    said = job.events.get(code=Because.ENDED_HERE).message
    assert said == "Stopped in the cluster: it had ended here (cancelled) but was still running there."
    clock.tick(5)
    cycle()
    assert job.events.filter(code=Because.ENDED_HERE).count() == 1


def test_a_job_whose_claim_is_missing_waits_and_preempts_no_one(submit, cycle, clock, vision, outsider):
    borrowers = fill_with_borrowers(submit, cycle)
    clock.tick(30)
    needs = submit(team=vision, user=outsider, name="needs-claim", replicas=WHOLE_NODE,
                   volumes=[{"claim": "datasets", "path": "/data"}], simulate={"duration": 60})  # fmt: skip
    for _ in range(12):
        cycle()
        clock.tick(5)
    needs.refresh_from_db()
    assert needs.state == "queued" and needs.reason_code == Because.MISSING_CLAIM
    assert needs.reason.startswith("Waiting for its claims: Job needs-claim-g")
    assert "PersistentVolumeClaim datasets, which namespace vision does not have" in needs.reason
    assert needs.position is None and not needs.events.filter(code=Because.CLUSTER_REFUSED).exists()
    assert [Job.objects.get(pk=job.pk).preemption_count for job in borrowers] == [0, 0]
    SimClaim.objects.create(namespace="vision", name="datasets", capacity=1024**4)
    for _ in range(6):
        cycle()
        clock.tick(5)
    needs.refresh_from_db()
    assert needs.state in ("admitted", "running")
    assert sum(Job.objects.get(pk=job.pk).preemption_count for job in borrowers) == 1  # R6 reclaims one node


def test_a_namespace_whose_claims_cannot_be_listed_holds_only_its_jobs_that_mount_claims(submit, cluster, clock,
                                                                                          vision, outsider):  # fmt: skip
    plain = submit(name="plain", simulate={"duration": 60})
    needs = submit(team=vision, user=outsider, name="needs-claim", volumes=[{"claim": "datasets", "path": "/data"}],
                   simulate={"duration": 60})  # fmt: skip
    admission_cycle(cluster=Refusing(cluster, "claims"), now=clock())
    plain.refresh_from_db()
    needs.refresh_from_db()
    assert plain.state == "admitted"
    assert needs.state == "queued" and needs.reason_code == Because.MISSING_CLAIM
    assert needs.reason == ("Waiting for its claims: the cluster did not list the claims of namespace vision "
                            "(claims: 403 Forbidden (a webhook says no)).")  # fmt: skip


def test_a_create_refused_again_and_again_backs_off_then_fails(submit, cluster, clock):
    job = submit(name="refused", simulate={"duration": 60})
    refusing = Refusing(cluster, "create_job")
    waits = []
    for _ in range(REFUSALS_BEFORE_FAILING):
        admission_cycle(cluster=refusing, now=clock())
        job.refresh_from_db()
        if job.state == "queued":
            waits.append(int((job.not_before - clock()).total_seconds()))
            clock.now = job.not_before
    assert waits == [30, 60, 120, 240]
    assert job.state == "failed" and job.reason_code == Because.CLUSTER_REFUSED
    assert job.reason == ("Failed: the cluster refused to create it 5 times in a row, the last time: create_job: "
                          "403 Forbidden (a webhook says no). Change the job and submit it again.")  # fmt: skip


def test_refusals_before_a_job_last_ran_do_not_count_towards_failing_it(submit, cluster, clock, cycle):
    job = submit(name="refused", simulate={"duration": 7200})
    refusing = Refusing(cluster, "create_job")
    for _ in range(REFUSALS_BEFORE_FAILING - 1):
        admission_cycle(cluster=refusing, now=clock())
        job.refresh_from_db()
        clock.now = job.not_before
    cycle()  # the cluster takes it this time, and it runs
    cycle()
    job.refresh_from_db()
    assert job.state == "running"
    # Later back in the queue (as a preemption leaves it), and refused once more: the count starts again.
    SimJob.objects.filter(job_id=job.pk).delete()
    Job.objects.filter(pk=job.pk).update(state="queued", placement=[], not_before=None)
    clock.tick(3600)
    admission_cycle(cluster=refusing, now=clock())
    job.refresh_from_db()
    assert job.state == "queued" and "tried again in 30 s" in job.reason


def test_a_victim_the_cluster_refuses_to_suspend_is_deleted_so_its_room_frees(submit, cluster, clock, cycle,
                                                                              vision, outsider):  # fmt: skip
    borrowers = fill_with_borrowers(submit, cycle)
    clock.tick(30)
    reclaim = submit(team=vision, user=outsider, name="reclaim", replicas=WHOLE_NODE, simulate={"duration": 600})
    refusing = Refusing(cluster, "suspend_job")
    for _ in range(12):
        reconcile(cluster=refusing, now=clock())
        admission_cycle(cluster=refusing, now=clock())
        clock.tick(5)
    victim = next(job for job in Job.objects.filter(pk__in=[b.pk for b in borrowers]) if job.preemption_count)
    reclaim.refresh_from_db()
    assert victim.state == "queued" and victim.preemption_count == 1
    assert victim.events.get(code=Because.STOP_REFUSED).message.startswith(
        "The cluster refused to suspend it (suspend_job: 403 Forbidden (a webhook says no)); its TFJob was "
        "deleted instead so that its room frees.")  # fmt: skip
    assert reclaim.state == "running"
    assert out_of_line(cluster.job_statuses()) == []


def test_a_victim_the_cluster_refuses_to_stop_at_all_says_so_once(submit, cluster, clock, cycle, vision, outsider):
    fill_with_borrowers(submit, cycle)
    clock.tick(30)
    submit(team=vision, user=outsider, name="reclaim", replicas=WHOLE_NODE, simulate={"duration": 600})
    refusing = Refusing(cluster, "suspend_job", "delete_job")
    for _ in range(6):
        reconcile(cluster=refusing, now=clock())
        admission_cycle(cluster=refusing, now=clock())
        clock.tick(5)
    victim = Job.objects.get(state="preempting")
    said = victim.events.filter(code=Because.STOP_REFUSED)
    assert said.count() == 1 and said.get().message.startswith(
        "The cluster refused to stop it (delete_job: 403 Forbidden (a webhook says no)); Gangway tries again "
        "at every reconcile until ")  # fmt: skip
    assert said.get().message.endswith(", 600 s after its first refusal; refused then, its preemption is given up "
                                       "and it runs on, counted in the quota of team maps.")  # fmt: skip
    assert victim.pk in running_objects()


def test_a_victim_that_finishes_before_its_suspend_lands_succeeds(submit, cluster, clock, cycle, vision, outsider):
    fill_with_borrowers(submit, cycle)
    clock.tick(30)
    submit(team=vision, user=outsider, name="reclaim", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=FaultyCluster(cluster, faults=[Fault("suspend_job", "before")]), now=clock())
    victim = Job.objects.get(state="preempting")
    SimJob.objects.filter(job_id=victim.pk).update(duration=31)  # its training ends before the suspend lands
    clock.tick(5)
    reconcile(cluster=cluster, now=clock())
    victim.refresh_from_db()
    assert victim.state == "succeeded" and not victim.events.filter(kind="requeued").exists()


def _cancelled_after_its_end(submit, cycle, clock, owner, **simulate) -> Job:
    """A job of 60 s that ran to its end, cancelled by its owner before any reconcile read that end."""
    job = submit(name="late", replicas=WHOLE_NODE, simulate={"duration": 60, **simulate})
    cycle()
    cycle()
    assert Job.objects.get(pk=job.pk).state == "running"
    clock.tick(61)
    return job_cancel(job=Job.objects.get(pk=job.pk), actor=owner)


def test_a_job_that_succeeded_before_its_cancel_landed_ends_succeeded_saying_nothing_was_stopped(
        submit, cluster, cycle, clock, owner):  # fmt: skip
    job = _cancelled_after_its_end(submit, cycle, clock, owner)
    assert job.state == "cancelling" and job.held_until_stopped
    reconcile(cluster=cluster, now=clock())
    job.refresh_from_db()
    assert (job.state, job.held_until_stopped, job.placement) == ("succeeded", False, ["node-01"])
    ended = list(job.events.order_by("id").values_list("kind", "code", "message"))[-2:]
    assert ended[0] == ("note", Because.ENDED_BEFORE_CANCEL,
                        "Its cancel came after it had ended on its own (succeeded in the cluster); nothing was stopped.")
    assert ended[1][0] == "succeeded" and ended[1][2].startswith("Succeeded: ")
    assert not job.events.filter(kind="cancelled").exists()
    assert PendingEvent.objects.filter(event__job=job, event__kind="succeeded").exists(), "its owner is told"
    used = admission_cycle(cluster=cluster, now=clock()).gpu_usage
    assert next(team for team in used if team["team"] == "maps")["used"] == 0, "it no longer counts"


def test_a_job_that_failed_before_its_cancel_landed_ends_failed_with_its_exit(submit, cluster, cycle, clock, owner):
    job = _cancelled_after_its_end(submit, cycle, clock, owner, fail=True)
    reconcile(cluster=cluster, now=clock())
    job.refresh_from_db()
    assert job.state == "failed" and job.finished_at == clock()
    assert "exited with code 1" in job.events.get(kind="failed").message
    assert job.events.filter(code=Because.ENDED_BEFORE_CANCEL).count() == 1


def test_a_victim_cancelled_after_it_finished_before_its_suspend_landed_succeeds(submit, cluster, clock, cycle,
                                                                                 vision, outsider, owner):  # fmt: skip
    fill_with_borrowers(submit, cycle)
    clock.tick(30)
    submit(team=vision, user=outsider, name="reclaim", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=FaultyCluster(cluster, faults=[Fault("suspend_job", "before")]), now=clock())
    victim = job_cancel(job=Job.objects.get(state="preempting"), actor=owner)
    SimJob.objects.filter(job_id=victim.pk).update(duration=31)  # its training ends before the suspend lands
    clock.tick(5)
    reconcile(cluster=cluster, now=clock())
    victim.refresh_from_db()
    assert victim.state == "succeeded" and not victim.events.filter(kind__in=("requeued", "cancelled")).exists()


def test_a_job_cancelled_while_the_cycle_plans_keeps_no_place(submit, cluster, clock, owner, monkeypatch):
    for name in "ab":
        submit(name=name, replicas=WHOLE_NODE, simulate={"duration": 7200})
    admission_cycle(cluster=cluster, now=clock())
    waiting = submit(name="waiting", replicas=WHOLE_NODE, simulate={"duration": 60})
    plan = loop.make_plan

    def cancel_while_planning(snapshot):
        made = plan(snapshot)
        job_cancel(job=Job.objects.get(pk=waiting.pk), actor=owner)
        return made

    monkeypatch.setattr(loop, "make_plan", cancel_while_planning)
    admission_cycle(cluster=cluster, now=clock())
    waiting.refresh_from_db()
    assert waiting.state == "cancelled" and waiting.position is None and waiting.eta is None
    assert list(waiting.events.order_by("pk").values_list("kind", flat=True))[-1] == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_reconcile_holds_no_row_while_it_waits_on_the_cluster(submit, cluster, clock):
    """A user's cancel locks its job's row: it must not wait behind reconcile's cluster calls."""
    moved = submit(name="moved", simulate={"duration": 7200})
    lost = submit(name="lost", simulate={"duration": 7200})
    admission_cycle(cluster=cluster, now=clock())
    SimJob.objects.filter(job_id=lost.pk).delete()  # its create never reached the cluster: reconcile creates it
    seen = []

    def try_lock():  # another connection, as a web worker handling a cancel
        try:
            with transaction.atomic():
                seen.append(Job.objects.select_for_update(nowait=True).get(pk=moved.pk).state)
        except DatabaseError:
            seen.append("locked")
        finally:
            connections.close_all()

    class Watched:
        def __getattr__(self, name):
            return getattr(cluster, name)

        def create_job(self, job):
            other = threading.Thread(target=try_lock)
            other.start()
            other.join()
            return cluster.create_job(job)

    result = reconcile(cluster=Watched(), now=clock())
    assert result.changed == 1 and result.created == 1  # `moved` went to running, then `lost` was created
    assert seen == ["running"]


def test_one_reconcile_at_a_time_and_a_dead_holders_lease_lapses(cluster, clock):
    with lease(RECONCILE_LOCK, seconds=60) as held:
        assert held and reconcile(cluster=cluster, now=clock()).skipped  # another worker's pass
    assert not reconcile(cluster=cluster, now=clock()).skipped
    # A worker killed mid-pass leaves its lease; it lapses when its time runs out, never before.
    Lease.objects.filter(name=RECONCILE_LOCK).update(holder="killed", until=timezone.now() + timedelta(seconds=60))
    assert reconcile(cluster=cluster, now=clock()).skipped
    Lease.objects.filter(name=RECONCILE_LOCK).update(until=timezone.now() - timedelta(seconds=1))
    assert not reconcile(cluster=cluster, now=clock()).skipped


def test_a_job_is_charged_where_its_pods_are_bound_not_where_the_plan_put_them(submit, cluster, clock):
    """The manifest does not pin nodes: the scheduler may bind a replica elsewhere before it runs."""
    job = submit(name="moved", replicas=[{"role": "Worker", "count": 2, "gpu": 4}], simulate={"duration": 7200})
    admission_cycle(cluster=cluster, now=clock())
    job.refresh_from_db()
    assert job.state == "admitted" and job.placement[0] == job.placement[1]  # R11: both on one node
    elsewhere = next(node.name for node in cluster.nodes() if node.name != job.placement[0])
    bound = JobStatus(job_id=job.pk, name=f"moved-g{job.pk}", namespace="maps", kind=job.kind, phase=Phase.CREATED,
                      pods=(OutsidePod(namespace="maps", name="moved-worker-0", node=elsewhere, gpu=4),))  # fmt: skip
    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=[bound])
    (charged,) = [running for running in world.snapshot.running if running.id == str(job.pk)]
    assert sorted(charged.nodes) == sorted([elsewhere, job.placement[0]])
