"""The simulated cluster drains a node as `kubectl drain` does: the replicas running there are evicted, and each,
made again, waits for room on a node that takes pods; its job runs short of it until then, its training stalled
as a real gang's is while a member is missing."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from jobs.models import Job
from scheduling.cluster import simulated, simulated_logs
from scheduling.cluster.base import WaitingPod
from scheduling.cluster.simulated_replicas import kept_room_drift
from scheduling.models import SimJob, SimNode
from scheduling.policy import plan
from scheduling.snapshot import build_world

pytestmark = pytest.mark.django_db

TWO_WHOLE_NODES = [{"role": "Worker", "count": 2, "gpu": 8}]


def running_wide(submit, cycle) -> Job:
    """A job of two whole-node workers, worker-0 on node-01 and worker-1 on node-02, running for two hours."""
    job = submit(name="wide", replicas=TWO_WHOLE_NODES, simulate={"duration": 7200})
    cycle()
    cycle()
    job.refresh_from_db()
    assert (job.state, job.placement) == (Job.State.RUNNING, ["node-01", "node-02"])
    return job


def test_a_drain_evicts_only_the_replicas_on_that_node_and_they_start_elsewhere_when_room_allows(
        submit, cycle, cluster, third_node):  # fmt: skip
    running_wide(submit, cycle)
    assert simulated.drain("node-02") == 1
    [status] = cluster.job_statuses()  # the pass places worker-1 on node-03 at once
    assert (status.running_pods, status.nodes, status.waiting_pods) == (2, ("node-01", "node-03"), ())
    assert SimNode.objects.get(name="node-02").schedulable is False
    assert kept_room_drift() == []


def test_a_replica_with_nowhere_to_go_waits_and_its_room_is_given_back(submit, cycle, cluster):
    job = running_wide(submit, cycle)
    assert simulated.drain("node-01") == 1
    [status] = cluster.job_statuses()
    assert (status.running_pods, status.nodes) == (1, ("node-02",))
    assert status.waiting_pods == (WaitingPod("worker-0", simulated.UNPLACED),)
    assert [pod.node for pod in status.pods] == ["node-02"]
    assert (SimJob.objects.get(job_id=job.pk).unplaced, SimNode.objects.get(name="node-01").gpu_used) == (1, 0)
    assert kept_room_drift() == []


def test_a_job_made_again_that_no_node_takes_waits_with_every_replica(submit, cycle, cluster):
    job = running_wide(submit, cycle)
    SimJob.objects.filter(job_id=job.pk).delete()  # deleted outside Gangway: reconcile creates it again
    simulated.cordon("node-01")
    simulated.cordon("node-02")
    cycle()
    [status] = cluster.job_statuses()
    assert (status.phase, status.running_pods) == ("Created", 0)
    assert status.waiting_pods == (WaitingPod("worker-0", simulated.GANG_WAITS),
                                   WaitingPod("worker-1", simulated.GANG_WAITS))  # fmt: skip


@pytest.mark.parametrize("short", [True, False], ids=["short of it", "an elastic job training on without it"])
def test_a_replica_lost_with_a_drained_node_is_charged_where_it_may_start_so_no_admission_takes_that_room(
        submit, cycle, cluster, clock, maps, vision, staff, short):  # fmt: skip
    maps.quotas.filter(resource="gpu").update(nominal=16)  # the job borrows nothing: no reclaim takes it
    job = running_wide(submit, cycle)
    simulated.drain("node-01")  # nowhere to go: worker-0 waits
    statuses = cluster.job_statuses()
    if not short:  # as the adapter reads an elastic job at or above its fewest Workers: nothing it needs waits
        statuses = [dataclasses.replace(status, waiting_pods=()) for status in statuses]
    rival = submit(name="rival", team=vision, user=staff, replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3)  # room comes, not taken yet

    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=statuses)

    assert {running.id: running.nodes for running in world.snapshot.running} == {str(job.pk): ("node-03", "node-02")}
    result = plan(world.snapshot)
    assert [admission.id for admission in result.admit] == []  # worker-0's room is kept for it
    assert [waiting.id for waiting in result.wait] == [str(rival.pk)]
    assert {team.team: team.used for team in result.teams}["maps"] == 16  # the job counts whole in its quota


# -- a short job's training stalls ----------------------------------------------------------------------------


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def test_a_job_short_of_a_replica_stalls_and_trains_on_only_once_every_replica_runs_again(
        submit, cycle, cluster, clock):  # fmt: skip
    job = submit(name="wide", replicas=TWO_WHOLE_NODES, simulate={"duration": 600})
    cycle()
    cycle()
    start = clock()
    assert SimJob.objects.get(job_id=job.pk).started_at == start
    clock.tick(300)  # 300 s trained; its log saved a checkpoint at step 30 just now
    simulated.drain("node-01")  # worker-0 has nowhere to go: node-02 holds worker-1
    cycle()
    assert SimJob.objects.get(job_id=job.pk).stalled_since == clock()

    clock.tick(400)  # past the 600 s it would have ended at, had it trained on
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    assert (sim.finished_at, Job.objects.get(pk=job.pk).state) == (None, Job.State.RUNNING)
    assert simulated_logs.last_checkpoint(sim, clock()) == start + timedelta(seconds=300), "none saved stalled"
    [status] = cluster.job_statuses()
    assert status.waiting_pods == (WaitingPod("worker-0", simulated.UNPLACED),)

    simulated.cordon("node-01", schedulable=True)  # room for worker-0 again: its gang trains on
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    assert (sim.nodes, sim.unplaced, sim.stalled_since, sim.stalls) == (["node-01", "node-02"], 0, None, [[300, 400]])

    clock.tick(299)
    cycle()
    assert SimJob.objects.get(job_id=job.pk).finished_at is None  # 599 s trained of 600
    clock.tick(1)
    cycle()
    sim = SimJob.objects.get(job_id=job.pk)
    assert (sim.finished_at, sim.succeeded) == (start + timedelta(seconds=1000), True)
    assert Job.objects.get(pk=job.pk).state == Job.State.SUCCEEDED
    [log] = cluster.logs(sim.namespace, job.pk, replica="worker-1", tail=None)
    steps = {line.split(" step ")[1].split()[0]: line for line in log.lines if " step " in line and "loss=" in line}
    assert len(steps) == 60 - 2  # a line per 10 s trained, checkpoints at steps 30 and 60 apart
    assert steps["29"].startswith(_stamp(start + timedelta(seconds=290)))
    assert steps["31"].startswith(_stamp(start + timedelta(seconds=710))), "written after the stall, not during it"
    assert kept_room_drift() == []


def test_a_job_evicted_while_it_stalls_keeps_its_last_checkpoint_and_no_stall(submit, cycle, clock, settings):
    job = submit(name="wide", replicas=TWO_WHOLE_NODES, simulate={"duration": 7200})
    cycle()
    cycle()
    clock.tick(350)  # a checkpoint at 300 s
    simulated.drain("node-01")
    cycle()
    clock.tick(settings.ADMISSION_TIMEOUT + 1)  # R13 evicts it, still short
    cycle()

    sim = SimJob.objects.get(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).state == Job.State.QUEUED
    assert (sim.suspended, sim.progress, sim.stalled_since, sim.stalls) == (True, 300, None, [])
