"""Writes of simulated jobs around the simulated cluster's own path (a raw `update` or `bulk_update` of a running
job's nodes or times, as tests and seeds write them) leave the nodes' kept figures right: the nodes they touch are
counted again at the next pass. A write that goes around that too (a `save` by hand) is told, never silent: by
the loop's invariants and by `manage.py doctor`, which read the figures and the running jobs under the cluster's
lock, so that a pass ending a job meanwhile is not taken for drift."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from scheduling.cluster.base import Tenants
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.cluster import simulated_replicas
from scheduling.cluster.simulated_replicas import kept_room_drift
from scheduling.invariants import check
from scheduling.models import SimJob, SimNode
from tests.cluster.test_simulated_room import GIB, NODE, Clock, a_job, assert_kept_figures_are_the_sum_of_what_runs, kept

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(db):
    """node-01 and node-02 of 8 GPUs; job 1 runs 4 GPUs on node-01. Returns the cluster."""
    SimNode.objects.bulk_create(SimNode(name=name, **NODE) for name in ("node-01", "node-02"))
    cluster = SimulatedCluster(clock=Clock(), seed=1, failure_rate=0)
    cluster.create_job(a_job(1, gpu=4, duration=3600))
    assert SimJob.objects.get(job_id=1).nodes == ["node-01"]
    assert kept()["node-01"] == [4, 1000, 4 * GIB]
    return cluster


def test_a_running_job_moved_by_a_raw_update_is_counted_again_on_both_nodes(running):
    SimJob.objects.filter(job_id=1).update(nodes=["node-02"])

    assert kept() == {"node-01": None, "node-02": None}
    running.create_job(a_job(2, gpu=8, duration=3600))  # the next pass counts them: node-01 is all free
    assert SimJob.objects.get(job_id=2).nodes == ["node-01"]
    assert kept() == {"node-01": [8, 1000, 4 * GIB], "node-02": [4, 1000, 4 * GIB]}
    assert kept_room_drift() == []


def test_a_running_job_stopped_by_a_raw_update_is_counted_off_its_node(running):
    SimJob.objects.filter(job_id=1).update(started_at=None, nodes=[])  # its pods never started, as a test says

    assert kept()["node-01"] is None
    running.create_job(a_job(2, gpu=8, duration=3600, hint=("node-01",)))  # job 1 waits first: it starts again

    assert SimJob.objects.get(job_id=1).nodes == ["node-01"] and SimJob.objects.get(job_id=2).nodes == ["node-02"]
    assert kept() == {"node-01": [4, 1000, 4 * GIB], "node-02": [8, 1000, 4 * GIB]}
    assert kept_room_drift() == []


def test_a_bulk_update_of_where_jobs_run_is_counted_again(running):
    job = SimJob.objects.get(job_id=1)
    job.nodes = ["node-02"]
    SimJob.objects.bulk_update([job], ["nodes"])

    assert kept() == {"node-01": None, "node-02": None}


def test_an_update_of_nothing_about_room_leaves_the_figures_counted(running):
    SimJob.objects.filter(job_id=1).update(duration=7200, message="longer")

    assert kept()["node-01"] == [4, 1000, 4 * GIB]


def test_running_jobs_created_in_bulk_are_counted_on_their_nodes(running):
    job = SimJob.objects.get(job_id=1)
    SimJob.objects.bulk_create([SimJob(job_id=2, namespace="maps", name="job-r2", kind="TFJob", manifest=job.manifest,
                                       replicas=job.replicas, nodes=["node-02"], created_at=job.created_at,
                                       started_at=job.started_at, duration=3600)])  # fmt: skip

    assert kept()["node-02"] is None
    running.create_job(a_job(3, gpu=8, duration=3600))
    assert_kept_figures_are_the_sum_of_what_runs()
    assert kept_room_drift() == []


def test_a_save_around_the_cluster_is_told_by_the_invariants_and_the_doctor(running):
    job = SimJob.objects.get(job_id=1)
    job.nodes = ["node-02"]
    job.save(update_fields=["nodes"])  # around everything: the figures still say node-01

    drift = kept_room_drift()
    assert drift == [
        f"simulated node node-01 keeps 4 GPUs, 1000 millicores and {4 * GIB} bytes as taken by its running jobs, "
        "which take 0 GPUs, 0 millicores and 0 bytes",
        f"simulated node node-02 keeps 0 GPUs, 0 millicores and 0 bytes as taken by its running jobs, which take "
        f"4 GPUs, 1000 millicores and {4 * GIB} bytes",
    ]
    assert set(drift) <= set(check(running, settled=False))
    findings = running.doctor(Tenants(teams=(), tiers=()))
    assert [finding.problem for finding in findings if "keeps" in finding.problem] == [
        f"The {problem}: a write went around the simulated cluster." for problem in drift]


def test_an_upsert_that_moves_a_running_job_counts_its_old_node_again_too(running):
    job = SimJob.objects.get(job_id=1)
    job.pk, job.nodes = None, ["node-02"]
    SimJob.objects.bulk_create([job], update_conflicts=True, unique_fields=["job_id"], update_fields=["nodes"])

    assert kept() == {"node-01": None, "node-02": None}
    running.create_job(a_job(2, gpu=8, duration=3600))  # the next pass counts them: node-01 is all free
    assert SimJob.objects.get(job_id=2).nodes == ["node-01"]
    assert kept_room_drift() == []


@pytest.mark.django_db(transaction=True)
def test_a_pass_ending_a_job_while_the_figures_are_checked_is_no_drift(monkeypatch):
    SimNode.objects.create(name="node-01", **NODE)
    clock = Clock()
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    cluster.create_job(a_job(1, gpu=4, duration=100))
    clock.tick(200)  # job 1 is due: the next pass ends it, giving its room back in one transaction
    passes: list[threading.Thread] = []
    read_running = simulated_replicas.running_taken

    def a_pass_meanwhile():
        """Another worker's pass between the check's two reads: it waits for the check's lock (or, without
        one, ends the job before the second read)."""
        def run():
            try:
                cluster.advance()
            finally:
                connection.close()
        passes.append(threading.Thread(target=run))
        passes[0].start()
        passes[0].join(timeout=2)
        return read_running()

    monkeypatch.setattr(simulated_replicas, "running_taken", a_pass_meanwhile)
    assert kept_room_drift() == []
    passes[0].join(timeout=30)
    assert not passes[0].is_alive()
    assert kept()["node-01"] == [0, 0, 0]  # the pass went on once the check let go
