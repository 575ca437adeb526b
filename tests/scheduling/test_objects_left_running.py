"""A job the database does not count whose object runs all the same holds its team's quota until it is stopped.

A create reported refused that went through leaves a queued job whose object runs; a job that ended here (cancelled,
say) may still run there. Reconcile stops both, and until it has, their pods run: the cycles count each as a running
job of its team, in its quota as well as its room, never as a victim (`snapshot._left_running`), and a job of that
team waiting for quota is told why. The queued one is held, so that it is not admitted a second time beside its own
object. An adopted job's object given back to its owner (rejected, say) is outside usage, in room only.

On PostgreSQL and the simulated cluster.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.services import job_cancel
from scheduling import loop
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.cluster.base import ClusterError, ClusterUnavailable, JobStatus, OutsidePod, Phase
from scheduling.cluster.faulty import Fault, FaultyCluster
from scheduling.invariants import broken_promises, charged_by_team
from scheduling.loop import admission_cycle
from scheduling.models import SimJob, SimNode
from scheduling.policy.model import Admission
from scheduling.reconcile import reconcile
from scheduling.snapshot import build_world, cluster_name, to_cluster_job
from scheduling.sweeps import SweepCode
from tenants.models import Quota
from tests.conftest import make_team

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]
SAYS = ("its object runs in the cluster all the same; Gangway stops it at its next reconcile, asking again at every "
        "one while the cluster refuses.")  # as STOPS_IT says it


def _maps_used(result) -> int:
    return next(team for team in result.gpu_usage if team["team"] == "maps")["used"]


def _runs(job: Job) -> bool:
    return SimJob.objects.filter(job_id=job.pk, suspended=False, finished_at__isnull=True).exists()


@pytest.fixture
def ghost(maps, submit, cluster, clock):
    """maps may use 8 GPUs (nominal 8, no borrowing) of the two nodes of 8; job `ghost` (experiment tier) asks for
    all of them and its create is answered with a refusal that went through: it is queued, backing off, while its
    object runs."""
    maps.quotas.filter(resource="gpu").update(borrowing_limit=0)
    job = submit(name="ghost", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 7200})
    admission_cycle(cluster=FaultyCluster(cluster, faults=[Fault("create_job", "after", ClusterError)]), now=clock())
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and _runs(job)
    return job


def test_a_queued_job_whose_object_runs_holds_its_team_s_quota_until_reconcile_stops_it(ghost, submit, cluster,
                                                                                         clock):  # fmt: skip
    """Before, its pods were outside usage only: the next job of maps was created on the other, free node, and maps
    ran 16 GPUs of its 8 until reconcile came."""
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})
    clock.tick(3600)  # past ghost's backoff: it would be offered to the policy again
    result = admission_cycle(cluster=cluster, now=clock())

    ghost.refresh_from_db(), after.refresh_from_db()
    assert _maps_used(result) == 8 and after.state == Job.State.QUEUED and not SimJob.objects.filter(
        job_id=after.pk).exists()
    assert after.reason_code == "borrowing_limit" and after.reason.endswith(
        f"Job ghost (#{ghost.pk}), queued, still holds 8 GPUs of the team's quota: {SAYS}")
    # Expected to start once reconcile has stopped ghost's object, not once ghost would have run its course.
    assert after.eta == clock() + timedelta(seconds=settings.RECONCILE_INTERVAL)
    # ghost is not admitted a second time beside its own object: it waits, saying why.
    assert ghost.state == Job.State.QUEUED and ghost.reason_code == Because.NOT_ADMITTED and ghost.position is None
    assert ghost.reason == ("Waiting for its object in the cluster to stop: it runs there without an admission (a "
                            "create reported refused that went through, or a resume made outside Gangway), and its 8 "
                            "GPUs count in the quota of team maps meanwhile. Gangway stops it at its next reconcile, "
                            "asking again at every one while the cluster refuses; the job waits in the queue again "
                            "then.")  # fmt: skip
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []

    reconcile(cluster=cluster, now=clock())
    assert not _runs(ghost)
    result = admission_cycle(cluster=cluster, now=clock())
    ghost.refresh_from_db(), after.refresh_from_db()
    assert _maps_used(result) == 8 and after.state == Job.State.ADMITTED  # its tier ranks above experiment
    assert ghost.state == Job.State.QUEUED and ghost.reason_code != Because.NOT_ADMITTED
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []


def test_a_job_cancelled_here_whose_object_runs_holds_its_team_s_quota_until_reconcile_deletes_it(
        ghost, submit, cluster, clock, owner):  # fmt: skip
    job_cancel(job=ghost, actor=owner)
    ghost.refresh_from_db()
    assert ghost.state == Job.State.CANCELLED and _runs(ghost)
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})
    result = admission_cycle(cluster=cluster, now=clock())
    after.refresh_from_db()
    assert _maps_used(result) == 8 and after.state == Job.State.QUEUED
    assert after.reason.endswith(f"Job ghost (#{ghost.pk}), cancelled, still holds 8 GPUs of the team's quota: {SAYS}")

    assert reconcile(cluster=cluster, now=clock()).deleted == 1
    result = admission_cycle(cluster=cluster, now=clock())
    after.refresh_from_db()
    assert _maps_used(result) == 8 and after.state == Job.State.ADMITTED


def test_a_job_left_running_is_never_a_victim(ghost, submit, cluster, clock):
    """Production work of maps finds ghost's GPUs taken: stopping a job the database does not count frees nothing
    a plan may give, so it waits instead of preempting it (ghost is marked stopping, and counted as starting now,
    so the thrash guard keeps it too)."""
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    clock.tick(3600)
    result = admission_cycle(cluster=cluster, now=clock())
    urgent.refresh_from_db()
    assert result.preempted == 0 and urgent.state == Job.State.QUEUED and _runs(ghost)


def _status(job: Job, *, adopted: bool) -> JobStatus:
    """A running object of `job`, its one pod bound to node-01."""
    name = SimJob.objects.get(job_id=job.pk).name
    return JobStatus(job_id=job.pk, name=name, namespace="maps", kind=job.kind, phase=Phase.RUNNING, adopted=adopted,
                     pods=(OutsidePod(namespace="maps", name=f"{name}-worker-0", node="node-01", gpu=8),))  # fmt: skip


@pytest.mark.parametrize("state", [Job.State.QUEUED, Job.State.REJECTED])
def test_an_adopted_object_is_charged_to_its_team_unless_given_back_to_its_owner(ghost, cluster, clock, state):
    """A queued adopted job (its owner resumed it outside Gangway) is Gangway's to stop; a rejected one is its
    owner's again, never touched, so its pods are outside usage (R12): in room, not in quota."""
    Job.objects.filter(pk=ghost.pk).update(state=state)
    status = _status(ghost, adopted=True)
    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=[status])
    teams = {running.id: running.team for running in world.snapshot.running}
    given_back = state == Job.State.REJECTED
    assert teams == ({f"outside:maps/{status.pods[0].name}": None} if given_back else {str(ghost.pk): "maps"})
    assert charged_by_team([status]) == ({} if given_back else {"maps": 8})


def test_the_promises_see_a_queued_job_s_object_above_its_team_s_limits(ghost, submit, cluster, clock):
    """What the cycles count, the promises check: a queued job's object counts in its team's limits while it runs."""
    after = submit(name="after", replicas=WHOLE_NODE, simulate={"duration": 600})
    Job.objects.filter(pk=after.pk).update(state=Job.State.ADMITTED, placement=["node-02"],
                                           admitted_at=clock() - timedelta(seconds=1))  # fmt: skip
    cluster.create_job(to_cluster_job(Job.objects.get(pk=after.pk)))
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == [
        "cluster jobs of team maps not suspended ask for 16 GPUs, above 8 + 0"]
    reconcile(cluster=cluster, now=clock())  # suspends ghost's object
    assert broken_promises(cluster.nodes(), cluster.job_statuses()) == []


def test_a_victim_whose_suspend_is_on_its_way_is_not_charged_beside_the_job_it_was_preempted_for(
        tiers, maps, vision, staff, submit, cluster, clock):  # fmt: skip
    """The apply phase met an outage before v1's suspend (or a cycle read the cluster while another worker
    applied): v1 is preempting, q admitted in its room and quota. v1's pods are outside usage meanwhile, in room
    only: charged to maps as well, maps would look 8 GPUs above what it holds once the suspend lands, and the
    next reclaim would take y, within maps' guaranteed nominal (R7)."""
    for index in (3, 4, 5):
        SimNode.objects.create(name=f"node-0{index}", gpu=8, cpu=64000, memory=512 * 1024**3)
    Quota.objects.filter(team=maps).update(lending_limit=0, borrowing_limit=16)  # maps: 8 nominal, borrows 16
    make_team("audio", tiers, gpu=16, lending_limit=0)  # idle, lends nothing: vision and speech lend 8 each
    speech = make_team("speech", tiers, gpu=8)
    y = submit(name="y", replicas=WHOLE_NODE, simulate={"duration": 72000})
    v1, v2 = (submit(name=name, tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 72000})
              for name in ("v1", "v2"))  # fmt: skip
    for _ in range(2):
        reconcile(cluster=cluster, now=clock())
        admission_cycle(cluster=cluster, now=clock())
        clock.tick(5)
    reconcile(cluster=cluster, now=clock())
    assert set(Job.objects.values_list("state", flat=True)) == {Job.State.RUNNING}
    clock.tick(3600)
    q = submit(name="q", team=vision, user=staff, replicas=WHOLE_NODE, simulate={"duration": 72000})
    outage = FaultyCluster(cluster, faults=[Fault("suspend_job", "before", ClusterUnavailable)])
    admission_cycle(cluster=outage, now=clock())
    v1.refresh_from_db(), q.refresh_from_db()
    assert v1.state == Job.State.PREEMPTING and q.state == Job.State.ADMITTED and _runs(v1)

    speech_job = submit(name="s", team=speech, user=staff, replicas=WHOLE_NODE, simulate={"duration": 72000})
    clock.tick(5)
    admission_cycle(cluster=cluster, now=clock())  # before any reconcile
    states = dict(Job.objects.values_list("pk", "state"))
    assert states[speech_job.pk] == Job.State.ADMITTED and states[v2.pk] == Job.State.PREEMPTING
    assert states[y.pk] == Job.State.RUNNING


def test_a_copy_of_a_queued_job_s_object_is_outside_usage(ghost, cluster, clock):
    """`kubectl get -o yaml` applied under another name keeps the job-id label: it is not the job, so it is
    neither held nor charged to its team."""
    reconcile(cluster=cluster, now=clock())  # ghost's own object suspended
    copy = dataclasses.replace(_status(ghost, adopted=False), name="ghost-copy")
    world = build_world(now=clock() + timedelta(hours=1), nodes=cluster.nodes(), outside=[], statuses=[copy])
    assert str(ghost.pk) not in world.held and str(ghost.pk) not in world.left_running
    assert [(running.id, running.team) for running in world.snapshot.running] == [
        (f"outside:maps/{copy.pods[0].name}", None)]
    assert charged_by_team([copy]) == {}


def test_objects_given_back_cost_one_query_however_many(ghost, submit, cluster, clock):
    """An adopted job cancelled because its object left the queue: its object, which runs on under its owner,
    keeps its job-id label, so every cycle lists it."""

    def queries(count: int) -> tuple[int, int]:
        statuses = []
        for index in range(count):
            job = submit(name=f"given-back-{index}", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
            Job.objects.filter(pk=job.pk).update(state=Job.State.CANCELLED)
            JobEvent.objects.create(job=job, kind=JobEvent.Kind.NOTE, message="Gone.", code=Because.DELETED_OUTSIDE)
            name = cluster_name(job.pk, job.name)
            statuses.append(JobStatus(job_id=job.pk, name=name, namespace="maps", kind=job.kind, phase=Phase.RUNNING,
                                      adopted=True, pods=(OutsidePod("maps", f"{name}-0", "node-02", gpu=1),)))
        with CaptureQueriesContext(connection) as snapshot:
            world = build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=statuses)
            assert not world.left_running
        with CaptureQueriesContext(connection) as promises:
            assert charged_by_team(statuses) == {}
        return len(snapshot), len(promises)

    assert queries(2) == queries(12)


def test_a_trial_left_running_counts_against_its_sweep_s_cap(maps, cluster, clock, cycle):
    """A Katib trial whose create (its object's resume) was reported refused but went through holds its GPUs in
    its sweep's cap, not only in its team's quota: the next trial waits for the cap, the sweep running 8 GPUs of
    its 8, not 12."""
    maps.quotas.filter(resource="gpu").update(nominal=16)  # the cap, not the quota, is what holds the trials
    for manifest in outside_examples.katib_trials(team="maps", experiment="tune-lr", trials=4, gpu=4):
        simulated_outside.add(manifest, now=clock())
    cycle()
    trials = list(Job.objects.filter(sweep__isnull=False).order_by("id"))
    assert [job.state for job in trials] == [Job.State.ADMITTED] * 2 + [Job.State.QUEUED] * 2
    ghost = trials[0]  # as its create reported refused, its object running all the same
    Job.objects.filter(pk=ghost.pk).update(state=Job.State.QUEUED, placement=[], admitted_at=None)

    admission_cycle(cluster=cluster, now=clock())

    states = dict(Job.objects.filter(sweep__isnull=False).values_list("pk", "state"))
    assert [states[job.pk] for job in trials] == [Job.State.QUEUED, Job.State.ADMITTED] + [Job.State.QUEUED] * 2
    assert Job.objects.get(pk=trials[2].pk).reason_code == SweepCode.SWEEP_CAP
    assert Job.objects.get(pk=ghost.pk).reason_code == Because.NOT_ADMITTED


def test_a_plan_that_would_preempt_a_job_left_running_preempts_nobody(ghost, submit, cluster, clock, monkeypatch):
    """The policy never picks a stopping job; should a plan do so all the same, the apply phase holds the job it
    was for back, saying why, instead of moving a queued job to preempting."""
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    clock.tick(3600)
    plan = loop.make_plan

    def picking_ghost(snapshot):
        made = plan(snapshot)
        if any(job.id == str(urgent.pk) for job in snapshot.pending):
            admit = Admission(id=str(urgent.pk), placement=(("node-01", 1),), victims=(str(ghost.pk),))
            return dataclasses.replace(made, admit=(admit,), wait=tuple(w for w in made.wait if w.id != admit.id))
        return made

    monkeypatch.setattr(loop, "make_plan", picking_ghost)
    result = admission_cycle(cluster=cluster, now=clock())

    ghost.refresh_from_db(), urgent.refresh_from_db()
    assert result.preempted == 0 and ghost.state == Job.State.QUEUED and _runs(ghost)
    assert urgent.state == Job.State.QUEUED and urgent.reason.startswith(
        f"Waiting: it would preempt job ghost (#{ghost.pk}), whose object runs in the cluster though it is queued "
        "here, so it could not make room. Nobody was preempted for it;")
