"""The admission policy keeps a running job as Gangway counts it: once a job runs (Gangway unsuspended it), nobody
else changes what its replicas ask, by `kubectl edit`, `apply` or `patch`, nor a PyTorchJob's Workers by
`kubectl scale`. Its labels and annotations stay its owner's, and so does suspending it. Evaluated from the
manifest (`admission_cel`)."""

from __future__ import annotations

import copy

import pytest

from tests.deploy.admission_cel import GANGWAY, request, review
from tests.deploy.test_admission_policy_cel import NS, tfjob, trainjob, update, with_suspend

ADOPTED = "The {kind} maps/{name} runs (it is not suspended): what its replicas ask cannot change while it runs, as " \
          "Gangway counts it in the quota of team maps and on its nodes; its labels and annotations may. To run it " \
          "otherwise, delete it and create it again suspended, with the label gangway.io/queue: maps: Gangway " \
          "queues the new job."  # fmt: skip


def running(build, **kw) -> dict:
    """A job Gangway admitted: unsuspended by Gangway, labelled with its Gangway job and given its gang."""
    obj = build(suspend=False, **kw)
    obj["metadata"]["labels"]["gangway.io/job-id"] = "12"
    if obj["kind"] != "TrainJob":
        obj["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": NS, "minAvailable": 2, "priorityClass": "standard"}
    return obj


def pytorchjob(**kw) -> dict:
    return tfjob(kind="PyTorchJob", **kw)


def _worker(obj: dict) -> dict:
    return next(iter(obj["spec"].values()))["Worker"] if obj["kind"] != "TrainJob" else obj["spec"]["trainer"]


def more_workers(obj):
    _worker(obj)["replicas"] = 4


def more_gpus(obj):
    _worker(obj)["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8


def another_group(obj):
    obj["spec"]["tfReplicaSpecs"]["PS"] = copy.deepcopy(_worker(obj))


def another_image(obj):
    _worker(obj)["template"]["spec"]["containers"][0]["image"] = "trainer:2"


def another_queue(obj):
    obj["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "vision"


def no_gang(obj):
    del obj["spec"]["runPolicy"]["schedulingPolicy"]


def more_nodes(obj):
    obj["spec"]["trainer"]["numNodes"] = 4


def more_gpus_a_node(obj):
    obj["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = 8


def a_runtime_patch(obj):
    obj["spec"]["runtimePatches"] = [{"manager": "alice", "trainingRuntimeSpec": {"template": {"spec": {}}}}]


def another_runtime(obj):
    obj["spec"]["runtimeRef"]["name"] = "torch-distributed-large"


CHANGES = [
    pytest.param(tfjob, more_workers, id="a TFJob given more Workers"),
    pytest.param(pytorchjob, more_workers, id="a PyTorchJob given more Workers"),
    pytest.param(tfjob, more_gpus, id="a TFJob asking more GPUs a Worker"),
    pytest.param(pytorchjob, more_gpus, id="a PyTorchJob asking more GPUs a Worker"),
    pytest.param(tfjob, another_group, id="a TFJob given another replica group"),
    pytest.param(tfjob, another_image, id="a TFJob whose pod template changes its image"),
    pytest.param(tfjob, another_queue, id="a TFJob moved to another Volcano queue"),
    pytest.param(pytorchjob, no_gang, id="a PyTorchJob whose gang is taken off"),
    pytest.param(trainjob, more_nodes, id="a TrainJob given more nodes"),
    pytest.param(trainjob, more_gpus_a_node, id="a TrainJob asking more GPUs a node"),
    pytest.param(trainjob, a_runtime_patch, id="a TrainJob given a runtime patch of its owner"),
    pytest.param(trainjob, another_runtime, id="a TrainJob pointed at another runtime"),
]


@pytest.mark.parametrize(("build", "change"), CHANGES)
def test_a_running_job_cannot_change_what_it_asks(build, change):
    before = running(build)
    after = copy.deepcopy(before)
    change(after)
    verdict = update(before, after)
    assert verdict.denials == (ADOPTED.format(kind=before["kind"], name=before["metadata"]["name"]),)


@pytest.mark.parametrize(("build", "change"), CHANGES)
def test_its_owner_may_suspend_it_and_may_change_it_while_it_waits(build, change):
    before = running(build)
    after = with_suspend(before, True)
    assert update(before, after).allowed  # its owner stops it (Gangway resumes it as Gangway counted it)
    change(after)
    assert update(before, after).allowed  # stopped and changed at once: Gangway never resumes it so
    waiting = with_suspend(before, True)
    assert update(waiting, after).allowed  # a waiting job may change: Gangway rejects it, saying what changed


@pytest.mark.parametrize(("build", "change"), CHANGES)
def test_gangway_and_the_status_subresource_are_not_held(build, change):
    before = running(build)
    after = copy.deepcopy(before)
    change(after)
    assert not update(before, after, user=GANGWAY).matched
    status = review(request(operation="UPDATE", obj=after, old=before, subresource="status"), after, before)
    assert not status.matched


@pytest.mark.parametrize("build", [tfjob, pytorchjob, trainjob])
def test_a_running_jobs_labels_annotations_and_status_may_change(build):
    before = running(build)
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["gangway.io/tier"] = "research"
    after["metadata"]["annotations"] = {"owner": "alice"}
    after["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    assert update(before, after).allowed
    explicit = copy.deepcopy(before)  # `kubectl apply` of a manifest that spells out suspend: false
    (explicit["spec"] if build is trainjob else explicit["spec"]["runPolicy"])["suspend"] = False
    assert update(before, explicit).allowed


def test_a_running_job_that_skipped_the_queue_is_held_as_well():
    before = tfjob(suspend=None, labels={"team": NS})  # runs without runPolicy at all (it predates the policy)
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["owner"] = "alice"
    assert update(before, after).allowed
    more_workers(after)
    assert not update(before, after).allowed


def test_a_job_gangway_created_is_told_to_submit_it_again_in_gangway():
    before = running(tfjob, labels={"app.kubernetes.io/managed-by": "gangway"})
    after = copy.deepcopy(before)
    more_workers(after)
    [message] = update(before, after).denials
    assert message.endswith("its labels and annotations may. To run it otherwise, cancel it in Gangway and submit "
                            "it again.")  # fmt: skip


def scale(replicas: int | None) -> dict:
    """The Scale `kubectl scale pytorchjob` reads and writes: its Worker count (left out when 0, as Kubernetes
    leaves out an empty integer)."""
    spec = {} if not replicas else {"replicas": replicas}
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "bert", "namespace": NS},
            "spec": spec, "status": {"replicas": 2}}  # fmt: skip


def scaled(before: int | None, after: int | None, *, user: str = "alice"):
    old, new = scale(before), scale(after)
    req = request(operation="UPDATE", obj=new, old=old, user=user, resource=("kubeflow.org", "pytorchjobs"),
                  subresource="scale")  # fmt: skip
    return review(req, new, old)


def test_kubectl_scale_cannot_change_a_pytorchjobs_workers():
    assert scaled(2, 4).denials == (
        "kubectl scale cannot change the Worker count of PyTorchJob maps/bert: Gangway counts the job as it was "
        "sent. To run it with another count, cancel it in Gangway and submit it again if Gangway created it; else "
        "delete it and create it again suspended, with the label gangway.io/queue: maps.",
    )
    assert not scaled(2, None).allowed  # to none
    assert not scaled(None, 1).allowed  # from none
    assert scaled(2, 2).allowed  # the same count: nothing changes
    assert not scaled(2, 4, user=GANGWAY).matched
