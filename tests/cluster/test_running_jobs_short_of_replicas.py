"""The Kubernetes adapter tells which replicas of a job wait to start, from its pods as the API server lists
them, over real HTTP to the fake API server. A replica whose pod completed never waits: a TFJob's workers may
end one by one while its chief runs on."""

from __future__ import annotations

import pytest

from scheduling.cluster.base import ClusterJob, ReplicaSpec, WaitingPod
from tests.cluster.busy_cluster import namespace

GiB = 2**30
NO_ROOM = "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu."
PULL = "ImagePullBackOff: its image could not be pulled (a wrong name or tag, or no access to the registry)"

JOB = ClusterJob(
    job_id=12, name="resnet-g12", namespace="maps", team="maps", kind="TFJob",
    image="tensorflow/tensorflow:2.12.0-gpu", command=("python", "/app/train.py"), args=(), env=(),
    replicas=(ReplicaSpec(role="Chief", count=1, gpu=1, cpu=2000, memory=4 * GiB),
              ReplicaSpec(role="Worker", count=3, gpu=1, cpu=2000, memory=4 * GiB)),
    tier="standard", grace_period=60, max_runtime=3600,
)  # fmt: skip


def replica_pod(obj: dict, role: str, index: int, phase: str = "Running", *, node_name: str | None = "n1",
                waiting: str = "", unschedulable: str = "") -> dict:  # fmt: skip
    """A replica pod as the Training Operator makes it (its labels, owned by its job object) and as the kubelet
    and the scheduler report it: `waiting` its container's waiting reason, `unschedulable` the scheduler's
    message on a pod it could not place."""
    meta = obj["metadata"]
    status: dict = {"phase": phase}
    if waiting:
        status["containerStatuses"] = [{"name": "tensorflow", "state": {"waiting": {"reason": waiting}}}]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable}]  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-{role.lower()}-{index}", "namespace": meta["namespace"],
                         "labels": {"gangway.io/job-id": meta["labels"]["gangway.io/job-id"],
                                    "training.kubeflow.org/replica-type": role.lower(),
                                    "training.kubeflow.org/replica-index": str(index)},
                         "ownerReferences": [{"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                              "name": meta["name"], "uid": meta["uid"], "controller": True}]},
            "spec": {"nodeName": node_name, "containers": [{"name": "tensorflow", "image": "busybox"}]},
            "status": status}  # fmt: skip


def running(fake, obj: dict) -> None:
    """The object's Running condition, as its operator writes it once its pods run."""
    fake.add({**obj, "status": {"conditions": [{"type": "Running", "status": "True"}]}})


def pods(fake, obj: dict, workers: list[dict | None]) -> None:
    """The chief running, and worker `i` as `workers[i]` says (`replica_pod`'s keywords), or no pod for None."""
    fake.add(replica_pod(obj, "Chief", 0))
    for index, worker in enumerate(workers):
        if worker is not None:
            fake.add(replica_pod(obj, "Worker", index, **worker))


# -- what the adapter reads ----------------------------------------------------------------------------------

RUNS = {}
PENDING_UNBOUND = {"phase": "Pending", "node_name": None, "unschedulable": NO_ROOM}
PENDING_PULLING = {"phase": "Pending", "node_name": "n2", "waiting": "ImagePullBackOff"}
PENDING_CREATING = {"phase": "Pending", "node_name": "n2", "waiting": "ContainerCreating"}
PENDING_BOUND = {"phase": "Pending", "node_name": "n2"}
SUCCEEDED = {"phase": "Succeeded"}


@pytest.mark.parametrize(("workers", "running_pods", "waiting"), [
    ([RUNS, RUNS, RUNS], 4, ()),
    ([RUNS, RUNS, PENDING_UNBOUND], 3, (WaitingPod("worker-2", f"not scheduled: {NO_ROOM[:-1]}"),)),
    ([RUNS, PENDING_PULLING, RUNS], 3, (WaitingPod("worker-1", PULL),)),
    ([RUNS, RUNS, PENDING_CREATING], 3, (WaitingPod("worker-2", "ContainerCreating"),)),
    ([RUNS, RUNS, PENDING_BOUND], 3, (WaitingPod("worker-2", "bound to node n2, not started yet"),)),
    ([RUNS, None, RUNS], 3, (WaitingPod("worker-1", "its pod has not been created"),)),
    ([SUCCEEDED, SUCCEEDED, RUNS], 2, ()),
    ([SUCCEEDED, SUCCEEDED, SUCCEEDED], 1, ()),
    ([SUCCEEDED, PENDING_UNBOUND, None], 1, (WaitingPod("worker-1", f"not scheduled: {NO_ROOM[:-1]}"),
                                             WaitingPod("worker-2", "its pod has not been created"))),
], ids=["every replica running", "a pod pending that no node takes", "a pod bound whose image cannot be pulled",
        "a pod bound whose containers are being created", "a pod bound that says nothing more",
        "a pod not made again yet", "workers that completed while the others run",
        "every worker completed while the chief runs", "one completed, one pending, one not made"])
def test_it_counts_the_replicas_waiting_to_start_from_the_pods_listed(fake, cluster, workers, running_pods, waiting):
    fake.add(namespace("maps"))
    cluster.create_job(JOB)
    obj = fake.get("TFJob", JOB.name, "maps")
    running(fake, obj)
    pods(fake, obj, workers)

    [status] = cluster.job_statuses()

    assert (status.running_pods, status.waiting_pods) == (running_pods, waiting)


def test_a_suspended_or_ended_job_has_no_replica_waiting(fake, cluster):
    fake.add(namespace("maps"))
    cluster.create_job(JOB)
    obj = fake.get("TFJob", JOB.name, "maps")
    pods(fake, obj, [PENDING_UNBOUND, None, RUNS])
    cluster.suspend_job(JOB)
    assert cluster.job_statuses()[0].waiting_pods == ()
    fake.add({**fake.get("TFJob", JOB.name, "maps"), "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}})
    assert cluster.job_statuses()[0].waiting_pods == ()


def test_pods_that_say_not_which_replica_they_are_leave_the_missing_ones_unnamed(fake, cluster):
    fake.add(namespace("maps"))
    cluster.create_job(JOB)
    obj = fake.get("TFJob", JOB.name, "maps")
    running(fake, obj)
    for index in range(3):  # an operator whose labels the registry does not know
        pod = replica_pod(obj, "Worker", index)
        pod["metadata"]["labels"] = {"gangway.io/job-id": "12"}
        fake.add(pod)

    [status] = cluster.job_statuses()

    assert status.waiting_pods == (WaitingPod("a replica", "its pod has not been created"),)
