"""The simulated cluster drains a node as `kubectl drain` does: the replicas running there are evicted, and each,
made again, waits for room on a node that takes pods; its job runs short of it until then."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.cluster import simulated
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


def test_a_replica_lost_with_a_drained_node_is_charged_where_it_may_start_so_no_admission_takes_that_room(
        submit, cycle, cluster, clock, maps, vision, staff):  # fmt: skip
    maps.quotas.filter(resource="gpu").update(nominal=16)  # the job borrows nothing: no reclaim takes it
    job = running_wide(submit, cycle)
    simulated.drain("node-01")  # nowhere to go: worker-0 waits
    statuses = cluster.job_statuses()
    rival = submit(name="rival", team=vision, user=staff, replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3)  # room comes, not taken yet

    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=statuses)

    assert {running.id: running.nodes for running in world.snapshot.running} == {str(job.pk): ("node-03", "node-02")}
    result = plan(world.snapshot)
    assert [admission.id for admission in result.admit] == []  # worker-0's room is kept for it
    assert [waiting.id for waiting in result.wait] == [str(rival.pk)]
    assert {team.team: team.used for team in result.teams}["maps"] == 16  # the job counts whole in its quota
