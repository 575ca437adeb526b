"""Someone copies an adopted job with `kubectl get -o yaml` and applies it in a namespace of no team:
the copy keeps the `gangway.io/job-id` label Gangway gave the original, on the job and on its pods."""

from __future__ import annotations

import copy

import pytest

from jobs.models import Job
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.logs import job_logs
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import _object, outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)
from tests.conftest import spec_data


def _pod(name, namespace, job_id, gpu, *, owner=None):
    """A replica pod; `owner` is the stored TFJob that controls it, named by its name and uid as the
    Training Operator writes it."""
    container = {"name": "tensorflow", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpu)},
                                                                         "requests": {"nvidia.com/gpu": str(gpu)}}}
    meta = {"name": name, "namespace": namespace, "labels": {"gangway.io/job-id": str(job_id)}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "n1", "containers": [container]}, "status": {"phase": "Running"}}  # fmt: skip


def test_a_copy_of_an_adopted_job_in_another_namespace_takes_room_as_outside_usage(world, fake, cluster):
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alice"}})
    fake.add(outside_job(gpu=2, replicas=2))  # maps: 4 GPUs of the node's 8
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    bert = Job.objects.get()
    fake.add(_pod("bert-kubectl-worker-0", "maps", bert.pk, 2))
    fake.add(_pod("bert-kubectl-worker-1", "maps", bert.pk, 2))
    copied = copy.deepcopy(_object(fake))  # kubectl get -o yaml, renamed, applied in namespace alice
    copied["metadata"] = {"name": "bert-copy", "namespace": "alice", "labels": dict(copied["metadata"]["labels"])}
    fake.add(copied)
    fake.add(_pod("bert-copy-worker-0", "alice", bert.pk, 2))
    fake.add(_pod("bert-copy-worker-1", "alice", bert.pk, 2))  # the node is full now
    reconcile(cluster=cluster)
    vision, _ = job_submit(team=world["vision"], spec=parse_spec(spec_data(
        team="vision", name="v", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])))  # fmt: skip

    admission_cycle(cluster=cluster)

    vision.refresh_from_db()
    assert vision.state == Job.State.QUEUED  # the copy's pods hold the GPUs it would take


def test_a_copy_that_fails_is_not_taken_for_the_job_nor_stopped_as_it(world, fake, cluster):
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "alice"}})
    fake.add(outside_job(gpu=2, replicas=2))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    bert = Job.objects.get()
    copied = copy.deepcopy(_object(fake))
    copied["metadata"] = {"name": "bert-copy", "namespace": "alice", "labels": dict(copied["metadata"]["labels"])}
    copied["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "TFJob bert-copy failed."}]}
    fake.add(copied)

    reconcile(cluster=cluster)

    bert.refresh_from_db()
    assert bert.state == Job.State.ADMITTED  # its own object runs on; the copy's end is not its end
    assert fake.get("TFJob", "bert-copy", "alice") is not None  # someone else's: never touched


def test_a_copy_renamed_in_the_same_namespace_takes_its_own_room_and_the_job_its_own(world, fake, cluster):
    """Its pods carry the job's label in the job's namespace too: their owner tells them apart, so the job's
    pods are not counted again as the copy's, nor the copy's running pods as the job's."""
    fake.add(outside_job(gpu=2, replicas=2))  # maps: 4 GPUs of the node's 8
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    bert = Job.objects.get()
    fake.add(_pod("bert-kubectl-worker-0", "maps", bert.pk, 2, owner=_object(fake)))
    fake.add(_pod("bert-kubectl-worker-1", "maps", bert.pk, 2, owner=_object(fake)))
    copied = copy.deepcopy(_object(fake))
    copied["metadata"] = {"name": "bert-copy", "namespace": "maps", "labels": dict(copied["metadata"]["labels"])}
    copied = fake.add(copied)
    fake.add(_pod("bert-copy-worker-0", "maps", bert.pk, 2, owner=copied))  # 6 GPUs taken, 2 free

    statuses = {status.name: status for status in cluster.job_statuses()}
    assert [pod.name for pod in statuses["bert-kubectl"].pods] == ["bert-kubectl-worker-0", "bert-kubectl-worker-1"]
    assert [pod.name for pod in statuses["bert-copy"].pods] == ["bert-copy-worker-0"]
    vision, _ = job_submit(team=world["vision"], spec=parse_spec(spec_data(
        team="vision", name="v", replicas=[{"role": "Worker", "count": 1, "gpu": 2}])))  # fmt: skip

    admission_cycle(cluster=cluster)

    vision.refresh_from_db()
    assert vision.state == Job.State.ADMITTED  # the 2 GPUs left, not taken by the job's pods counted twice


def test_the_log_page_of_a_job_shows_its_own_pods_and_not_a_renamed_copys(world, fake, cluster):
    fake.add(outside_job(gpu=2, replicas=1))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    bert = Job.objects.get()
    fake.add(_pod("bert-kubectl-worker-0", "maps", bert.pk, 2, owner=_object(fake)))
    copied = copy.deepcopy(_object(fake))
    copied["metadata"] = {"name": "bert-copy", "namespace": "maps", "labels": dict(copied["metadata"]["labels"])}
    fake.add(_pod("bert-copy-worker-0", "maps", bert.pk, 2, owner=fake.add(copied)))
    fake.add(_pod("bert-kubectl-worker-1", "maps", bert.pk, 2))  # no owner (as a TrainJob's pods): goes by label

    logs = job_logs(bert, cluster=cluster)

    assert [replica.pod for replica in logs.replicas] == ["bert-kubectl-worker-0", "bert-kubectl-worker-1"]
