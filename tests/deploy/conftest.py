"""A small busy world for the metrics and log tests: admissions, a reclaim, a rejection, a queue."""

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle


@pytest.fixture
def busy_world(nodes, maps, vision, outsider, submit):
    """Two cycles on two nodes of 8 GPUs; returns the jobs by name.

    Cycle 1: maps runs 8 + 8 GPUs (borrowing vision's idle nominal) and one
    job waits; a 40-GPU job submitted before any node was known is rejected.
    Cycle 2: vision asks 8 GPUs and reclaims them: one maps job is preempted.
    """
    cluster = SimulatedCluster(seed=1, failure_rate=0)
    jobs = {"too-big": submit(name="too-big", replicas=[{"role": "Worker", "count": 40, "gpu": 1}])}
    admission_cycle(cluster=cluster)
    for name in ("first", "second", "third"):
        jobs[name] = submit(name=name, replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    admission_cycle(cluster=cluster)
    jobs["reclaim"] = submit(team=vision, user=outsider, name="reclaim", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    admission_cycle(cluster=cluster)
    for job in jobs.values():
        job.refresh_from_db()
    return jobs
