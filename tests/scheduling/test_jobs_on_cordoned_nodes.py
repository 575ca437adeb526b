"""A job running on a node that takes no new pods (cordoned as a drain begins) is charged to that node in
the loop's snapshot: it holds none of the room left on the nodes that take pods, and its GPUs still count in
its team's quota. Charged to a schedulable node instead, it would keep a job that fits there waiting."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.models import SimNode
from scheduling.policy import plan
from scheduling.snapshot import build_world

pytestmark = pytest.mark.django_db


def _state(job: Job) -> tuple[str, tuple[str, ...]]:
    job.refresh_from_db()
    return job.state, tuple(job.placement)


def _world(cluster, clock):
    return build_world(now=clock(), nodes=cluster.nodes(), outside=[], statuses=cluster.job_statuses())


@pytest.fixture
def drained(submit, vision, cycle, cluster, clock):
    """maps' `old-run` (6 GPUs) keeps running on node-01, cordoned since; its `new-run` (4 GPUs) runs on
    node-02, which has 4 GPUs left. Returns both jobs."""
    old = submit(name="old-run", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    new = submit(name="new-run", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    assert _state(old)[1] == ("node-01",)
    assert _state(new)[1] == ("node-02",)
    SimNode.objects.filter(name="node-01").update(schedulable=False)
    return old, new


def test_a_job_on_a_cordoned_node_is_charged_there_and_still_counts_in_its_teams_quota(drained, cluster, clock):
    old, new = drained
    world = _world(cluster, clock)
    running = {job.id: job for job in world.snapshot.running}
    assert running[str(old.pk)].nodes == ("node-01",)
    assert running[str(new.pk)].nodes == ("node-02",)
    assert {team.team: team.used for team in plan(world.snapshot).teams}["maps"] == 10


def test_a_job_that_fits_beside_the_drained_one_is_admitted_without_preempting_anyone(drained, submit, vision,
                                                                                      staff, cycle):  # fmt: skip
    waiting = submit(name="fits-in-the-rest", team=vision, user=staff,
                     replicas=[{"role": "Worker", "count": 1, "gpu": 4}])  # fmt: skip
    cycle()
    assert _state(waiting) in ((Job.State.ADMITTED, ("node-02",)), (Job.State.RUNNING, ("node-02",)))
    for job in drained:
        assert _state(job)[0] in (Job.State.ADMITTED, Job.State.RUNNING)


def test_a_cluster_whose_every_node_is_cordoned_still_counts_the_jobs_running_there(drained, cluster, clock):
    old, new = drained
    SimNode.objects.update(schedulable=False)
    world = _world(cluster, clock)
    assert {job.id: job.nodes for job in world.snapshot.running} == {str(old.pk): ("node-01",),
                                                                     str(new.pk): ("node-02",)}
