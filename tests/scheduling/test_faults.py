"""Faults at every step of a cycle and of reconcile, on PostgreSQL and the simulated cluster.

Each case builds one busy moment (a team borrowing, another reclaiming, jobs
waiting, a cancel in flight), injects one fault, then lets the loop recover
with a healthy cluster. At the fault and after it: no node or team over its
limits, no cluster job asking for more than the cluster has, no job with two
cluster objects; once recovered, the database and the cluster match one to one
and every job submitted is still there.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from jobs.models import Job
from jobs.services import job_cancel
from scheduling import loop, records
from scheduling.cluster.base import ClusterError, ClusterUnavailable
from scheduling.cluster.faulty import Fault, FaultyCluster, Killed
from scheduling.invariants import broken_promises, check
from scheduling.loop import admission_cycle
from scheduling.models import SimJob
from scheduling.reconcile import reconcile

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]
HALF_NODE = [{"role": "Worker", "count": 1, "gpu": 4}]


@pytest.fixture
def busy(submit, cluster, clock, vision, outsider, owner):
    """maps borrows 8 GPUs, vision comes to reclaim them, more jobs queue, one cancel is in flight."""
    jobs = [submit(name="borrow-0", replicas=WHOLE_NODE, simulate={"duration": 7200})]
    jobs += [submit(name=f"borrow-{k}", replicas=HALF_NODE, simulate={"duration": 7200}) for k in (1, 2)]
    reconcile(cluster=cluster, now=clock())
    admission_cycle(cluster=cluster, now=clock())
    reconcile(cluster=cluster, now=clock())
    assert [j.state for j in Job.objects.order_by("pk")] == ["running"] * 3
    clock.tick(30)
    jobs.append(submit(team=vision, user=outsider, name="reclaim", replicas=WHOLE_NODE, simulate={"duration": 60}))
    jobs += [submit(name=f"wait-{k}", replicas=HALF_NODE, simulate={"duration": 60}) for k in range(2)]
    jobs.append(submit(team=vision, user=outsider, name="small", replicas=HALF_NODE, simulate={"duration": 60}))
    job_cancel(job=Job.objects.get(name="borrow-2"), actor=owner)
    return jobs


def step(cluster, clock) -> list[str]:
    """One beat of the loop: reconcile then a cycle; returns what broke (faults may raise through)."""
    reconcile(cluster=cluster, now=clock())
    admission_cycle(cluster=cluster, now=clock())
    return []


def recover(cluster, clock, submitted: int) -> list[str]:
    """A healthy cluster, a few beats; returns every broken promise at the end."""
    for _ in range(4):
        clock.tick(5)
        reconcile(cluster=cluster, now=clock())
        admission_cycle(cluster=cluster, now=clock())
        reconcile(cluster=cluster, now=clock())
    problems = check(cluster, settled=True)
    if Job.objects.count() != submitted:
        problems.append(f"{Job.objects.count()} jobs in the database, {submitted} submitted")
    return problems


CLUSTER_FAULTS = [
    pytest.param(Fault(call, when, error), id=f"{error.__name__} {when} {call}")
    for call in ("check_create", "create_job", "suspend_job", "delete_job", "job_statuses", "nodes")
    for when in ("before", "after")
    for error in (ClusterUnavailable, Killed)
] + [
    pytest.param(Fault("create_job", "before", ClusterError), id="the cluster refuses the create"),
    pytest.param(Fault("check_create", "before", ClusterError), id="the cluster refuses the preemptor's dry run"),
    pytest.param(Fault("create_job", "after", Killed, nth=2), id="killed after the second create"),
]


@pytest.mark.parametrize("fault", CLUSTER_FAULTS)
def test_a_cluster_fault_anywhere_never_over_admits_and_is_recovered(busy, cluster, clock, fault):
    faulty = FaultyCluster(cluster, faults=[fault])
    try:
        step(faulty, clock)
        step(faulty, clock)
    except (Killed, ClusterUnavailable):
        pass
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []
    assert recover(cluster, clock, submitted=len(busy)) == []


def _raises_once(error: BaseException):
    """A stand-in that raises `error` the first time it is called, then does what the original does."""
    calls = []

    def wrap(original):
        def stand_in(*args, **kwargs):
            if not calls:
                calls.append(1)
                raise error
            return original(*args, **kwargs)

        return stand_in

    return wrap


LOOP_FAULTS = [
    pytest.param((loop, "make_plan"), Killed("after read"), id="killed after reading"),
    pytest.param((loop, "_commit"), Killed("after plan"), id="killed after planning"),
    pytest.param((loop, "record_waits"), DatabaseError("connection lost"), id="database lost before the waits"),
    pytest.param((loop, "_apply"), Killed("after commit"), id="killed after the commit"),
    pytest.param((records, "usage_sample"), DatabaseError("integer out of range"), id="record phase raises"),
    pytest.param((records, "cycle_done"), Killed("before the cycle row"), id="killed before the cycle row"),
    pytest.param((loop, "log_decision"), Killed("between events"), id="killed between two decisions"),
]


@pytest.mark.parametrize("target, error", LOOP_FAULTS)
def test_a_crash_at_any_phase_of_the_cycle_never_over_admits(busy, cluster, clock, monkeypatch, target, error):
    module, name = target
    monkeypatch.setattr(module, name, _raises_once(error)(getattr(module, name)))
    with pytest.raises(type(error)):
        step(cluster, clock)
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []
    monkeypatch.undo()
    assert recover(cluster, clock, submitted=len(busy)) == []


def test_a_failing_cycle_is_recorded_and_counted(busy, cluster, clock, monkeypatch):
    from django.test import override_settings

    from portal.context import loop_health
    from scheduling.models import Cycle

    monkeypatch.setattr(records, "usage_sample", lambda now: (_ for _ in ()).throw(DatabaseError("out of range")))
    with override_settings(CYCLE_FAILURES_BEFORE_UNREADY=2):
        for _ in range(2):
            with pytest.raises(DatabaseError):
                admission_cycle(cluster=cluster, now=clock())
        failed = Cycle.objects.filter(failed=True)
        assert failed.count() == 2 and "out of range" in failed.first().error
        assert records.cycle_failures() == 2
        assert records.loop_trouble(clock()).failing == 2

        class Staff:
            is_staff = True

        class Request:
            user = Staff()

        assert loop_health(Request()) == {"cycles_failing": 2}


def test_the_issue_reproducer_a_record_that_always_fails_never_over_admits(submit, cluster, clock, monkeypatch):
    """Every cycle fails after its decisions: four rounds, still no more GPUs than the cluster has."""
    monkeypatch.setattr(records, "usage_sample", lambda now: (_ for _ in ()).throw(DatabaseError("out of range")))
    for k in range(8):
        submit(name=f"j{k}", replicas=WHOLE_NODE, simulate={"duration": 7200})
    for _ in range(4):
        reconcile(cluster=cluster, now=clock())
        with pytest.raises(DatabaseError):
            admission_cycle(cluster=cluster, now=clock())
        clock.tick(5)
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []
    assert SimJob.objects.count() == 2  # two nodes of 8: two whole-node jobs, no more


def test_an_admitted_job_without_placement_counts_its_whole_demand(submit, cluster, clock):
    """Created in the cluster but not started (no nodes yet): the next cycle must not admit into its room."""
    from scheduling.snapshot import to_cluster_job

    first = submit(name="first", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], simulate={"duration": 600})
    cluster.create_job(to_cluster_job(first))  # created, its pods not started: no node to read back
    Job.objects.filter(pk=first.pk).update(state="admitted", placement=[])
    second = submit(name="second", replicas=WHOLE_NODE)
    admission_cycle(cluster=cluster, now=clock())
    second.refresh_from_db()
    assert second.state == "queued"


def test_pods_of_a_job_the_database_does_not_count_take_room(submit, cluster, clock):
    """A job the cluster runs while the database does not count it is outside usage (R12) until it stops."""
    from scheduling.snapshot import to_cluster_job

    ghost = submit(name="ghost", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], simulate={"duration": 600})
    cluster.create_job(to_cluster_job(ghost))
    assert SimJob.objects.get(job_id=ghost.pk).started_at is not None
    Job.objects.filter(pk=ghost.pk).update(state="cancelled")  # e.g. its row moved on; its pods still run
    late = submit(name="late", replicas=WHOLE_NODE)
    admission_cycle(cluster=cluster, now=clock())
    late.refresh_from_db()
    assert late.state == "queued"


def test_creates_that_fail_leave_the_jobs_admitted_saying_so_until_the_cluster_answers(submit, cluster, clock):
    job = submit(simulate={"duration": 600})
    faulty = FaultyCluster(cluster, faults=[Fault("create_job", "before", ClusterUnavailable)])
    result = admission_cycle(cluster=faulty, now=clock())
    assert result.error and result.admitted == 1
    job.refresh_from_db()
    assert job.state == "admitted" and job.reason_code == "create_pending"
    assert "cannot be reached" in job.reason
    assert reconcile(cluster=cluster, now=clock()).created == 1
    job.refresh_from_db()
    assert job.reason_code == "" and SimJob.objects.filter(job_id=job.pk).exists()


def test_a_refused_create_requeues_the_job_with_a_backoff(submit, cluster, clock):
    job = submit(simulate={"duration": 600})
    faulty = FaultyCluster(cluster, faults=[Fault("create_job", "before", ClusterError)])
    admission_cycle(cluster=faulty, now=clock())
    job.refresh_from_db()
    assert job.state == "queued" and job.reason_code == "cluster_refused" and job.not_before is not None
    assert "refused" in job.events.last().message
    assert admission_cycle(cluster=cluster, now=clock()).admitted == 0, "not before its backoff"
    clock.tick(31)
    assert admission_cycle(cluster=cluster, now=clock()).admitted == 1


def test_a_lost_suspend_is_sent_again_by_reconcile(busy, cluster, clock):
    faulty = FaultyCluster(cluster, faults=[Fault("suspend_job", "before", ClusterUnavailable)])
    clock.tick(5)
    reconcile(cluster=cluster, now=clock())
    result = admission_cycle(cluster=faulty, now=clock())
    assert result.preempted == 1 and result.error
    victim = Job.objects.get(state="preempting")
    assert SimJob.objects.get(job_id=victim.pk).suspended is False
    assert reconcile(cluster=cluster, now=clock()).suspended == 1
    assert SimJob.objects.get(job_id=victim.pk).suspended is True


def test_victims_read_the_numbers_of_this_cycle_and_no_other_teams_job(busy, cluster, clock):
    clock.tick(5)
    reconcile(cluster=cluster, now=clock())
    assert admission_cycle(cluster=cluster, now=clock()).preempted == 1
    from jobs.models import JobEvent

    event = JobEvent.objects.get(kind="preempted")
    assert event.code == "reclaimed" and "team vision" in event.message
    assert "#" not in event.message, "the preemptor is another team's job: named by its team only"
    assert "(12 in use, 8 nominal)" in event.message, event.message


def test_a_preemptor_whose_dry_run_is_refused_backs_off_and_nobody_is_preempted(busy, cluster, clock):
    faulty = FaultyCluster(cluster, faults=[Fault("check_create", "before", ClusterError)])
    step(faulty, clock)
    reclaim = Job.objects.get(name="reclaim")
    assert faulty.fired == ["check_create before ClusterError"]
    assert reclaim.state == Job.State.QUEUED and reclaim.not_before is not None
    assert reclaim.reason.startswith("The cluster would refuse to create it: injected: check_create failed before")
    # The plan made again without it gives vision's other job the room, preempting what that one needs only.
    assert list(Job.objects.filter(state=Job.State.ADMITTED, team__slug="vision").values_list("name", flat=True)) == [
        "small"]
    assert list(Job.objects.filter(state=Job.State.PREEMPTING).values_list("name", flat=True)) == ["borrow-0"]
    assert recover(cluster, clock, submitted=len(busy)) == []


def test_a_refused_create_in_reconcile_requeues_that_job_and_corrects_the_others(submit, cluster, clock):
    first, second = (submit(name=n, simulate={"duration": 600}) for n in ("first", "second"))
    admission_cycle(cluster=cluster, now=clock())
    SimJob.objects.all().delete()  # both lost: reconcile creates them again
    faulty = FaultyCluster(cluster, faults=[Fault("create_job", "before", ClusterError)])
    assert reconcile(cluster=faulty, now=clock()).created == 1
    states = dict(Job.objects.values_list("name", "state"))
    assert states == {"first": "queued", "second": "admitted"}
    assert Job.objects.get(name="first").reason_code == "cluster_refused"
