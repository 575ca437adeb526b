"""A TrainJob is admitted by the loop and run by the simulated cluster like any gang: all its nodes at once."""

from __future__ import annotations

from jobs.models import Job
from scheduling.models import SimJob

TRAINJOB = {"kind": "TrainJob", "runtime": "torch-distributed", "name": "llama", "replicas": None,
            "num_nodes": 2, "resources_per_node": {"gpu": 8}, "simulate": {"duration": 100}}  # fmt: skip


def test_the_loop_admits_a_trainjob_and_the_simulated_cluster_runs_its_nodes(submit, cluster, cycle, clock):
    job = submit(**TRAINJOB)
    cycle()
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and sorted(job.placement) == ["node-01", "node-02"]
    sim = SimJob.objects.get(job_id=job.pk)
    assert (sim.manifest["kind"], sim.manifest["spec"]["trainer"]["numNodes"]) == ("TrainJob", 2)
    assert [replica.replica for replica in cluster.logs("maps", job.pk)] == ["node-0", "node-1"]
    clock.tick(100)
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED


def test_a_trainjob_that_needs_more_nodes_than_are_free_starts_none(submit, cluster, cycle):
    submit(**{**TRAINJOB, "name": "first", "num_nodes": 1})
    cycle()
    job = submit(**TRAINJOB)
    cycle()
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and not SimJob.objects.filter(job_id=job.pk).exists()
