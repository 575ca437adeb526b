"""The admission loop on a cluster with two GPU types: nodes are typed by their labels, jobs get a
type, and the cluster is told which."""

from __future__ import annotations

from jobs.models import Job, JobEvent
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import ClusterNode
from scheduling.snapshot import build_world, to_cluster_job
from tests.conftest import A100_LABEL


def asking(job: Job, *types: str) -> Job:
    Job.objects.filter(pk=job.pk).update(gpu_type=list(types))
    job.refresh_from_db()
    return job


def test_the_node_mirror_names_each_nodes_type_from_its_labels(gpu_types, cycle):
    cycle()
    assert dict(ClusterNode.objects.values_list("name", "gpu_type")) == {"node-01": "a100", "node-02": "l4"}


def test_a_job_that_names_no_type_gets_its_teams_cheapest_type_first(gpu_types, submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 2, "gpu": 1}])
    cycle()
    job.refresh_from_db()
    assert job.state == "admitted" and job.assigned_gpu_type == "l4"
    assert job.placement == ["node-02", "node-02"]
    assert "Admitted on l4 GPUs (it named no type" in JobEvent.objects.filter(job=job, kind="admitted").get().message


def test_a_job_falls_back_to_its_second_type_and_its_event_says_why(gpu_types, submit, cycle):
    filler = asking(submit(name="filler", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]), "a100")
    cycle()
    job = asking(submit(name="second", replicas=[{"role": "Worker", "count": 1, "gpu": 4}]), "a100", "l4")
    cycle()
    job.refresh_from_db()
    assert Job.objects.get(pk=filler.pk).assigned_gpu_type == "a100"
    assert job.state == "admitted" and job.assigned_gpu_type == "l4" and job.placement == ["node-02"]
    message = JobEvent.objects.filter(job=job, kind="admitted").get().message
    assert "Admitted on l4 GPUs (choice 2 of 2: a100 could not take it now)" in message


def test_a_running_job_counts_against_the_type_it_was_given(gpu_types, submit, cycle):
    job = asking(submit(replicas=[{"role": "Worker", "count": 1, "gpu": 2}]), "a100")
    cycle()
    world = build_world(now=Job.objects.get(pk=job.pk).admitted_at, nodes=SimulatedCluster().nodes(), outside=[])
    (running,) = world.snapshot.running
    assert running.gpu_type == "a100"
    assert world.snapshot.gpu_types == ("l4", "a100")
    assert [n.gpu_type for n in world.snapshot.nodes] == ["a100", "l4"]


def test_the_cluster_job_carries_the_label_that_pins_its_type(gpu_types, submit, cycle):
    job = asking(submit(replicas=[{"role": "Worker", "count": 1, "gpu": 2}]), "a100")
    cycle()
    cluster_job = to_cluster_job(Job.objects.get(pk=job.pk))
    assert cluster_job.gpu_type == "a100" and cluster_job.gpu_type_label == A100_LABEL


def test_without_types_nothing_is_typed(nodes, submit, cycle):
    job = submit()
    cycle()
    job.refresh_from_db()
    assert job.assigned_gpu_type == "" and to_cluster_job(job).gpu_type_label == ()
    assert set(ClusterNode.objects.values_list("gpu_type", flat=True)) == {""}


def test_a_reclaims_victim_reads_the_figures_of_its_own_gpu_type(gpu_types, submit, cycle, vision):
    borrower = asking(submit(name="borrower", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]), "a100")
    asking(submit(name="beside", replicas=[{"role": "Worker", "count": 1, "gpu": 2}]), "l4")
    cycle()
    assert Job.objects.get(pk=borrower.pk).assigned_gpu_type == "a100"  # 4 of its 8 a100 GPUs borrowed
    asking(submit(name="owner", team=vision, replicas=[{"role": "Worker", "count": 1, "gpu": 4}]), "a100")
    cycle()
    message = JobEvent.objects.get(job=borrower, kind="preempted").message
    assert "Preempted to return a100 GPUs borrowed by team maps (8 in use, 4 nominal) to team vision" in message
