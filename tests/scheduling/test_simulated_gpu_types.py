"""The simulated cluster on two GPU types (node-01 a100, node-02 l4): a job pinned to a type runs on that
type's nodes alone, as Kubernetes honours the manifest's required node affinity."""

from __future__ import annotations

import dataclasses

from jobs.models import Job
from scheduling.cluster import simulated_outside
from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec
from scheduling.models import SimJob, SimOutsideJob
from tests.cluster.test_outside_jobs import outside_job
from tests.conftest import A100_LABEL, L4_LABEL


def a_job(job_id: int, *, gpu: int, hint: tuple[str, ...] = (), on: tuple[str, str] | tuple[()] = ()) -> ClusterJob:
    return ClusterJob(
        job_id=job_id, name=f"job-g{job_id}", namespace="maps", team="maps", kind="TFJob", image="busybox",
        command=("true",), args=(), env=(), replicas=(ReplicaSpec("Worker", 1, gpu, 1000, 1024**3),),
        tier="standard", grace_period=30, max_runtime=None, sim_duration=600, placement=hint,
        gpu_type={A100_LABEL: "a100", L4_LABEL: "l4"}.get(on, ""), gpu_type_label=on,
    )  # fmt: skip


def status(cluster, job_id: int):
    return {s.job_id: s for s in cluster.job_statuses()}[job_id]


def test_a_job_pinned_to_a_type_waits_for_its_types_node_instead_of_running_on_another(gpu_types, cluster):
    cluster.create_job(a_job(1, gpu=8, on=A100_LABEL))  # fills node-01, the only a100 node
    cluster.create_job(a_job(2, gpu=2, hint=("node-01",), on=A100_LABEL))

    assert status(cluster, 1).nodes == ("node-01",)
    waiting = status(cluster, 2)
    assert waiting.phase is Phase.CREATED and waiting.nodes == ()  # node-02 has 8 free GPUs, but of l4

    cluster.delete_job("maps", "job-g1", "TFJob")
    assert status(cluster, 2).phase is Phase.RUNNING and status(cluster, 2).nodes == ("node-01",)


def test_a_job_without_a_type_takes_any_node_with_room(gpu_types, cluster):
    cluster.create_job(a_job(1, gpu=8, on=A100_LABEL))
    cluster.create_job(a_job(2, gpu=2, hint=("node-01",)))

    assert status(cluster, 2).nodes == ("node-02",)


def test_a_job_pinned_to_a_type_no_node_carries_never_starts(gpu_types, cluster):
    cluster.create_job(dataclasses.replace(a_job(1, gpu=1), gpu_type="h100",
                                           gpu_type_label=("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")))  # fmt: skip

    assert status(cluster, 1).phase is Phase.CREATED


def test_the_loop_runs_a_job_on_the_type_its_admission_gave(gpu_types, submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 2, "gpu": 2}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])

    cycle()

    assert Job.objects.get(pk=job.pk).assigned_gpu_type == "a100"
    assert SimJob.objects.get(job_id=job.pk).nodes == ["node-01", "node-01"]


def test_an_adopted_job_is_pinned_by_its_admission_patch(gpu_types, clock, cycle):
    simulated_outside.add(outside_job(gpu=2, replicas=1), now=clock())

    cycle()  # adopted and admitted: it names no type, so it gets its team's cheapest, l4

    job = Job.objects.get()
    assert job.assigned_gpu_type == "l4"
    manifest = SimOutsideJob.objects.get().manifest
    pod = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": L4_LABEL[0], "operator": "In", "values": [L4_LABEL[1]]}]}]
    assert manifest["metadata"]["labels"]["gangway.io/gpu-type"] == "l4"
    assert SimJob.objects.get(job_id=job.pk).nodes == ["node-02"]
