"""Pods labelled with a Gangway job id whose job object is gone still hold their GPUs (R12), over real HTTP.

A deleted job's pods terminate through their grace period (a training job may take minutes to save
a checkpoint), and a pod made from a Gangway pod's YAML keeps the label with no job object behind
it: the admission loop counts such pods as outside usage, once, until they are gone. The fake API
server has no garbage collector and no kubelet: a test marks a deleted job's pods terminating, and
takes them away once their grace period is over, as those would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.services import job_cancel, job_submit
from jobs.spec import parse_spec
from scheduling.loop import admission_cycle
from scheduling.models import ClusterNode
from scheduling.reconcile import reconcile
from scheduling.snapshot import to_cluster_job
from tests.conftest import make_team, spec_data

POD_KEY = ("api/v1", "pods")


@pytest.fixture
def teams(fake, tiers):
    """Teams maps and vision, 8 GPUs of quota each and nothing to borrow; their namespaces exist."""
    made = {slug: make_team(slug, tiers, gpu=8, borrowing_limit=0) for slug in ("maps", "vision")}
    for slug in made:
        fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": slug}})
    return made


def _node(fake, name: str, gpu: int) -> None:
    fake.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
              "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpu)}}})  # fmt: skip


def _submit(team, name: str, gpu: int, **spec) -> Job:
    """One replica of `gpu` GPUs (a TFJob), unless `spec` says otherwise."""
    data = spec_data(**{"team": team.slug, "name": name, "replicas": [{"role": "Worker", "count": 1, "gpu": gpu}],
                        **spec})  # fmt: skip
    return job_submit(team=team, spec=parse_spec(data))[0]


def _pod(name: str, namespace: str, job_id: int, gpu: int, node: str, *, owner: dict | None = None) -> dict:
    """A running replica pod labelled with the job id; `owner` is its controller's ownerReference."""
    container = {"name": "tensorflow", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpu)},
                                                                         "requests": {"nvidia.com/gpu": str(gpu)}}}
    meta = {"name": name, "namespace": namespace, "labels": {"gangway.io/job-id": str(job_id)}}
    if owner:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [container]}, "status": {"phase": "Running"}}  # fmt: skip


def _owner(obj: dict) -> dict:
    """The ownerReference the Training Operator writes on the pods of the stored job object `obj`."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"]}  # fmt: skip


def _start(fake, job: Job, node: str) -> list[dict]:
    """Starts the job's replica pods on `node` and says it runs, as the Training Operator and the kubelet
    would; returns the pods."""
    target = to_cluster_job(Job.objects.get(pk=job.pk))
    obj = fake.get(target.kind, target.name, target.namespace)
    fake.add({**obj, "status": {"conditions": [{"type": "Running", "status": "True"}]}})
    pods = [_pod(f"{target.name}-worker-{index}", target.namespace, job.pk, replica.gpu, node, owner=_owner(obj))
            for index, replica in enumerate(r for r in target.replicas for _ in range(r.count))]  # fmt: skip
    return [fake.add(pod) for pod in pods]


def _terminating(fake, pods: list[dict]) -> None:
    """What the garbage collector does to the pods of a deleted job: they are deleted with their grace
    period, so they stay, running, with a deletionTimestamp, while they save a checkpoint."""
    now = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    for pod in pods:
        fake.add({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": now, "deletionGracePeriodSeconds": 600}})


def _gone(fake, pods: list[dict]) -> None:
    """Their grace period is over: the kubelet confirms them stopped and the API server forgets them."""
    for pod in pods:
        fake.objects.pop((*POD_KEY, pod["metadata"]["namespace"], pod["metadata"]["name"]))


def _state(job: Job) -> str:
    job.refresh_from_db()
    return job.state


def test_a_cancelled_jobs_pod_still_terminating_keeps_a_job_off_its_gpus_until_it_is_gone(teams, fake, cluster):
    _node(fake, "n1", 8)
    cancelled, kept = _submit(teams["maps"], "checkpointing", 4), _submit(teams["maps"], "kept", 4)
    admission_cycle(cluster=cluster)
    pods = _start(fake, cancelled, "n1")
    _start(fake, kept, "n1")
    job_cancel(job=cancelled)
    reconcile(cluster=cluster)  # deletes its TFJob; its pod saves a checkpoint through its grace period
    assert _state(cancelled) == Job.State.CANCELLED
    assert [obj["metadata"]["name"] for obj in fake.list("TFJob")] == [to_cluster_job(kept).name]
    _terminating(fake, pods)
    waiting = _submit(teams["vision"], "v", 4)

    admission_cycle(cluster=cluster)

    assert _state(waiting) == Job.State.QUEUED  # n1: 4 GPUs kept + 4 still held by the terminating pod
    assert ClusterNode.objects.get(name="n1").outside_gpu == 4  # the node map and the fit preview see it too
    assert [(pod.name, pod.node, pod.gpu) for pod in cluster.job_statuses().strays] == [
        (pods[0]["metadata"]["name"], "n1", 4)]
    _gone(fake, pods)

    admission_cycle(cluster=cluster)

    assert _state(waiting) == Job.State.ADMITTED
    assert ClusterNode.objects.get(name="n1").outside_gpu == 0


GONE = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "resnet-old", "uid": "deleted-long-ago"}


@pytest.mark.parametrize("namespace, owner", [
    ("alice", "the job's TFJob"), ("alice", None), ("maps", GONE),
], ids=["in another namespace, its owner kept", "in another namespace, its owner taken out",
        "in the job's namespace, owned by an object that is not there"])  # fmt: skip
def test_a_bare_copy_of_a_gangway_pod_takes_room_as_outside_usage(teams, fake, cluster, namespace, owner):
    """`kubectl get pod -o yaml`, renamed and applied: the copy keeps the job-id label and, unless taken
    out, an ownerReference; no job object owns it (the job's TFJob is in another namespace, or the
    object the reference names is gone)."""
    _node(fake, "n1", 8)
    original = _submit(teams["maps"], "resnet", 4)
    admission_cycle(cluster=cluster)
    [pod] = _start(fake, original, "n1")
    if owner == "the job's TFJob":
        owner = pod["metadata"]["ownerReferences"][0]
    fake.add(_pod("resnet-by-hand", namespace, original.pk, 4, "n1", owner=owner))
    waiting = _submit(teams["vision"], "v", 4)

    admission_cycle(cluster=cluster)

    assert _state(waiting) == Job.State.QUEUED  # n1: 4 GPUs of the job, 4 of the copy
    assert [(stray.namespace, stray.name) for stray in cluster.job_statuses().strays] == [(namespace, "resnet-by-hand")]


def test_a_suspended_victims_terminating_pods_count_once_beside_a_cancelled_jobs(teams, fake, cluster):
    """The victim's object is there, suspended: its pods, saving a checkpoint, count through its status
    (as a job the database no longer counts), never again as strays; the cancelled job's are strays."""
    _node(fake, "n1", 12)
    kept, low = _submit(teams["maps"], "kept", 4), _submit(teams["maps"], "low", 4, tier="experiment")
    cancelled = _submit(teams["vision"], "cancelled", 2)
    admission_cycle(cluster=cluster)
    _start(fake, kept, "n1")
    victim_pods = _start(fake, low, "n1")
    cancelled_pods = _start(fake, cancelled, "n1")
    reconcile(cluster=cluster)  # all three run
    Job.objects.filter(pk=low.pk).update(started_at=timezone.now() - timedelta(hours=1))  # past the thrash guard
    job_cancel(job=cancelled)
    reconcile(cluster=cluster)
    _terminating(fake, cancelled_pods)  # n1: 4 + 4 + 2 of 12
    _node(fake, "n2", 4)
    urgent = _submit(teams["maps"], "urgent", 4)  # maps is at its quota: low (experiment) makes way

    admission_cycle(cluster=cluster)

    assert (_state(low), _state(urgent)) == (Job.State.PREEMPTING, Job.State.ADMITTED)
    assert urgent.placement == ["n2"]  # the best fit, leaving n1 to the victim's terminating pod
    _terminating(fake, victim_pods)  # suspended: its pod saves a checkpoint
    statuses = cluster.job_statuses()
    assert [pod.name for status in statuses if status.job_id == low.pk for pod in status.pods] == [
        victim_pods[0]["metadata"]["name"]]
    assert [pod.name for pod in statuses.strays] == [cancelled_pods[0]["metadata"]["name"]]
    too_big = _submit(teams["vision"], "four", 4)

    admission_cycle(cluster=cluster)

    assert _state(too_big) == Job.State.QUEUED  # n1: kept 4, the victim's pod 4, the cancelled job's 2
    fits = _submit(teams["vision"], "two", 2)

    admission_cycle(cluster=cluster)

    assert _state(fits) == Job.State.ADMITTED  # the 2 GPUs left: the victim's pod is not counted twice
    assert fits.placement == ["n1"]


TRAINJOB = {"kind": "TrainJob", "runtime": "torch-distributed", "replicas": None}


def _start_nodes(fake, job: Job, node: str) -> list[dict]:
    """Starts a TrainJob's node pods on `node`, as its JobSet's Jobs make them: a batch Job owns each,
    not the TrainJob, so they go by their job-id label alone; returns them."""
    target = to_cluster_job(Job.objects.get(pk=job.pk))
    pods = []
    for index in range(target.replicas[0].count):
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": f"{target.name}-node-0", "uid": f"job-{job.pk}"}
        pod = _pod(f"{target.name}-node-0-{index}", target.namespace, job.pk, target.replicas[0].gpu, node,
                   owner=owner)  # fmt: skip
        pod["metadata"]["labels"].update({"jobset.sigs.k8s.io/replicatedjob-name": "node",
                                          "batch.kubernetes.io/job-completion-index": str(index)})  # fmt: skip
        pods.append(fake.add(pod))
    return pods


def test_a_running_trainjobs_pods_are_its_own_and_a_deleted_ones_are_strays(teams, fake, cluster):
    _node(fake, "n1", 8)
    llama = _submit(teams["maps"], "llama", 0, **TRAINJOB, num_nodes=2, resources_per_node={"gpu": 2})
    old = _submit(teams["maps"], "old", 0, **TRAINJOB, num_nodes=1, resources_per_node={"gpu": 2})
    admission_cycle(cluster=cluster)
    assert (_state(llama), _state(old)) == (Job.State.ADMITTED, Job.State.ADMITTED)
    own = _start_nodes(fake, llama, "n1")
    old_pods = _start_nodes(fake, old, "n1")
    job_cancel(job=old)
    reconcile(cluster=cluster)  # deletes old's TrainJob; its JobSet's pods terminate
    _terminating(fake, old_pods)

    statuses = cluster.job_statuses()
    [status] = statuses
    assert (status.job_id, sorted(pod.name for pod in status.pods)) == (
        llama.pk, sorted(pod["metadata"]["name"] for pod in own))
    assert [pod.name for pod in statuses.strays] == [old_pods[0]["metadata"]["name"]]
    too_big = _submit(teams["vision"], "four", 4)

    admission_cycle(cluster=cluster)

    assert _state(too_big) == Job.State.QUEUED  # n1: llama's 4 and old's terminating 2
    fits = _submit(teams["vision"], "two", 2)

    admission_cycle(cluster=cluster)

    assert _state(fits) == Job.State.ADMITTED  # the 2 GPUs left: llama's pods are not strays as well


def test_a_job_created_again_under_its_name_does_not_take_its_deleted_objects_pods_for_its_own(teams, fake, cluster):
    """Someone deletes a running job's TFJob by hand; reconcile creates it again under the same name while
    the old pods still terminate: the new object is not their owner (another uid), they are strays."""
    _node(fake, "n1", 8)
    _node(fake, "n2", 8)
    job = _submit(teams["maps"], "resnet", 4)
    admission_cycle(cluster=cluster)
    old_pods = _start(fake, job, "n1")
    target = to_cluster_job(job)
    cluster.delete_job(target.namespace, target.name, target.kind)  # kubectl delete tfjob
    _terminating(fake, old_pods)
    reconcile(cluster=cluster)  # creates it again: same name, another object

    [status] = statuses = cluster.job_statuses()
    assert (status.name, status.running_pods, status.pods) == (target.name, 0, ())
    assert [pod.name for pod in statuses.strays] == [old_pods[0]["metadata"]["name"]]
    waiting = _submit(teams["vision"], "v", 4)

    admission_cycle(cluster=cluster)

    waiting.refresh_from_db()
    assert waiting.placement == ["n2"]  # n1: the job's 4 GPUs, and 4 still held by its old pod
