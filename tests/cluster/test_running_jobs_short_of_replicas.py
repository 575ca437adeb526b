"""The Kubernetes adapter tells which replicas of a job wait to start, from its pods as the API server lists
them, and reconcile evicts a running job short of one for ADMISSION_TIMEOUT (R13), over real HTTP to the fake
API server. A replica whose pod completed never waits: a TFJob's workers may end one by one while its chief
runs on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings

from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.base import ClusterJob, ReplicaSpec, WaitingPod
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.busy_cluster import namespace, node
from tests.cluster.test_outside_jobs import outside_job
from tests.conftest import spec_data

GiB = 2**30
CHIEF_AND_WORKERS = [{"role": "Chief", "count": 1, "gpu": 1}, {"role": "Worker", "count": 3, "gpu": 1}]
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


# -- what reconcile does with it -----------------------------------------------------------------------------


@pytest.fixture
def maps_on_three_nodes(fake, maps):
    """Nodes n1, n2 and n3 of 8 GPUs; team maps (8 nominal, may borrow 8) and its namespace."""
    for name in ("n1", "n2", "n3"):
        fake.add(node(name))
    fake.add(namespace("maps"))
    return maps


def _running_job(fake, cluster, team, owner) -> tuple[Job, dict]:
    """A TFJob of a chief and three workers, admitted, its pods running, and seen running by reconcile."""
    job, _ = job_submit(team=team, owner=owner, spec=parse_spec(spec_data(name="wide", replicas=CHIEF_AND_WORKERS)))
    admission_cycle(cluster=cluster)
    obj = fake.get("TFJob", f"wide-g{job.pk}", "maps")
    running(fake, obj)
    pods(fake, obj, [RUNS, RUNS, RUNS])
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    return job, obj


def test_workers_that_complete_one_by_one_while_the_chief_runs_never_make_the_job_short(
        fake, cluster, maps_on_three_nodes, owner):  # fmt: skip
    job, obj = _running_job(fake, cluster, maps_on_three_nodes, owner)
    for index in range(3):
        fake.add(replica_pod(obj, "Worker", index, "Succeeded"))
        reconcile(cluster=cluster, now=job.started_at + timedelta(seconds=(index + 1) * settings.ADMISSION_TIMEOUT))

    job.refresh_from_db()
    assert (job.state, job.short_since, job.reason_code) == (Job.State.RUNNING, None, "")
    assert not job.events.filter(code=Because.SHORT_OF_REPLICAS).exists()


def test_a_running_job_whose_recreated_pod_no_node_takes_is_evicted_after_the_admission_timeout(
        fake, cluster, maps_on_three_nodes, owner):  # fmt: skip
    job, obj = _running_job(fake, cluster, maps_on_three_nodes, owner)
    fake.add(replica_pod(obj, "Worker", 2, **PENDING_UNBOUND))  # its node failed; made again, it fits nowhere
    short = job.started_at + timedelta(seconds=60)

    reconcile(cluster=cluster, now=short)
    reconcile(cluster=cluster, now=short + timedelta(seconds=settings.ADMISSION_TIMEOUT))

    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.short_since == short
    assert job.reason.startswith(f"Only 3 of 4 replicas running: worker-2 waits to start (not scheduled: {NO_ROOM[:-1]})"
                                 "; evicted and requeued if it has not started by about ")  # fmt: skip
    fake.log.clear()

    reconcile(cluster=cluster, now=short + timedelta(seconds=settings.ADMISSION_TIMEOUT + 1))

    job.refresh_from_db()
    assert (job.state, job.attempt, job.reason_code) == (Job.State.QUEUED, 2, Because.BACKOFF)
    evicted = job.events.get(kind=JobEvent.Kind.EVICTED)
    assert evicted.code == Because.SHORT_OF_REPLICAS
    assert evicted.message == (f"Evicted: only 3 of 4 replicas were running {settings.ADMISSION_TIMEOUT} s after it "
                               f"ran short: worker-2 had not started (not scheduled: {NO_ROOM[:-1]}); its other "
                               "replicas held their GPUs meanwhile.")  # fmt: skip
    assert fake.get("TFJob", obj["metadata"]["name"], "maps")["spec"]["runPolicy"]["suspend"] is True
    assert [method for method, _ in fake.log if method == "DELETE"] == []


def test_an_adopted_job_short_of_a_replica_is_suspended_never_deleted(fake, cluster, maps_on_three_nodes):
    fake.add(outside_job(gpu=1, replicas=2))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job = Job.objects.get()
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    running(fake, obj)
    fake.add(replica_pod(obj, "Worker", 0))
    fake.add(replica_pod(obj, "Worker", 1))
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.adopted and job.state == Job.State.RUNNING
    fake.add(replica_pod(obj, "Worker", 1, "Pending", node_name="n2", waiting="ErrImagePull"))
    reconcile(cluster=cluster, now=job.started_at)
    fake.log.clear()

    reconcile(cluster=cluster, now=job.started_at + timedelta(seconds=settings.ADMISSION_TIMEOUT + 1))

    job.refresh_from_db()
    assert job.state == Job.State.QUEUED
    assert job.events.get(kind=JobEvent.Kind.EVICTED).code == Because.SHORT_OF_REPLICAS
    assert fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True
    assert [method for method, _ in fake.log if method == "DELETE"] == []
