"""A kind only the registry knows (MPIJob) goes through the Kubernetes adapter like the built-in ones."""

from scheduling.cluster.base import ClusterJob, Phase, ReplicaSpec

JOB = ClusterJob(
    job_id=5, name="allreduce-g5", namespace="maps", team="maps", kind="MPIJob", image="mpioperator/mpi-pi",
    command=(), args=(), env=(), tier="standard", grace_period=30, max_runtime=None,
    replicas=(ReplicaSpec("Launcher", 1, 0, 1000, 2**30), ReplicaSpec("Worker", 2, 1, 1000, 2**30)),
)  # fmt: skip


def test_it_creates_suspends_resumes_reads_and_deletes_a_registered_kind(fake, cluster, mpijob):
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "maps"}})

    cluster.create_job(JOB)
    assert fake.get("MPIJob", "allreduce-g5", "maps")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    cluster.suspend_job(JOB)
    assert fake.get("MPIJob", "allreduce-g5", "maps")["spec"]["runPolicy"]["suspend"] is True
    assert [(s.job_id, s.phase) for s in cluster.job_statuses()] == [(5, Phase.SUSPENDED)]
    cluster.create_job(JOB)
    assert fake.get("MPIJob", "allreduce-g5", "maps")["spec"]["runPolicy"]["suspend"] is False

    obj = fake.get("MPIJob", "allreduce-g5", "maps")
    obj["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "message": "done"}]}
    fake.add(obj)
    assert [(s.phase, s.message) for s in cluster.job_statuses()] == [(Phase.SUCCEEDED, "done")]

    cluster.delete_job("maps", "allreduce-g5", "MPIJob")
    assert fake.get("MPIJob", "allreduce-g5", "maps") is None
