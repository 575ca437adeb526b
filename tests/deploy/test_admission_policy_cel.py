"""The admission policy's CEL, evaluated: what the API server lets through and what it denies, with the
message a person reads. The expressions are the manifest's own (`admission_cel`), so a typo or a wrong
condition in deploy/kubernetes/admission-policy.yaml fails here, not only on a real API server."""

from __future__ import annotations

import copy

import pytest

from tests.deploy.admission_cel import GANGWAY, PolicyError, Verdict, expressions, policy, program, request, review

NS = "maps"


def tfjob(*, suspend: bool | None = True, labels: dict | None = None, workers: int = 2, gpu: int = 4,
          kind: str = "TFJob") -> dict:  # fmt: skip
    """A TFJob (or PyTorchJob) as kubectl sends it; `suspend` None: no runPolicy.suspend at all."""
    replicas = "tfReplicaSpecs" if kind == "TFJob" else "pytorchReplicaSpecs"
    container = "tensorflow" if kind == "TFJob" else "pytorch"
    spec: dict = {replicas: {"Worker": {"replicas": workers, "template": {"spec": {"containers": [
        {"name": container, "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": gpu}}}]}}}}}
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": "bert", "namespace": NS, "uid": "u-1",
                         "labels": {"gangway.io/queue": NS} if labels is None else labels},
            "spec": spec}  # fmt: skip


def trainjob(*, suspend: bool | None = True, labels: dict | None = None, nodes: int = 2, gpu: int = 4) -> dict:
    """A Kubeflow Trainer TrainJob as kubectl sends it: it suspends in spec.suspend."""
    spec: dict = {"runtimeRef": {"name": "torch-distributed"},
                  "trainer": {"numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpu}}}}  # fmt: skip
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "llama", "namespace": NS, "uid": "u-2",
                         "labels": {"gangway.io/queue": NS} if labels is None else labels},
            "spec": spec}  # fmt: skip


def create(obj: dict, *, user: str = "alice", spec: dict | None = None):
    return review(request(operation="CREATE", obj=obj, user=user), obj, None, spec)


def update(old: dict, new: dict, *, user: str = "alice", spec: dict | None = None):
    return review(request(operation="UPDATE", obj=new, old=old, user=user), new, old, spec)


def with_suspend(obj: dict, suspend: bool) -> dict:
    changed = copy.deepcopy(obj)
    if obj["kind"] == "TrainJob":
        changed["spec"]["suspend"] = suspend
    else:
        changed["spec"].setdefault("runPolicy", {})["suspend"] = suspend
    return changed


JOBS = [pytest.param(tfjob, id="TFJob"), pytest.param(lambda **kw: tfjob(kind="PyTorchJob", **kw), id="PyTorchJob"),
        pytest.param(trainjob, id="TrainJob")]  # fmt: skip


def test_every_expression_of_the_policy_parses():
    spec = policy()["spec"]
    assert len(expressions()) == len(spec["matchConditions"]) + len(spec["variables"]) + len(spec["validations"]) + sum(
        "messageExpression" in validation for validation in spec["validations"])
    for expression in expressions():
        program(expression)


@pytest.mark.parametrize("build", JOBS)
def test_a_job_created_suspended_with_the_queue_label_is_allowed(build):
    verdict = create(build())
    assert verdict.matched and verdict.allowed, verdict.denials


@pytest.mark.parametrize("build", JOBS)
def test_gangways_own_account_is_let_through_whatever_it_sends(build):
    obj = build(suspend=False, labels={})
    assert create(obj, user=GANGWAY) == Verdict(matched=False)
    assert not update(build(), obj, user=GANGWAY).matched  # its admission unsuspends an adopted job
    assert not create(obj, user="system:serviceaccount:other:gangway-scheduler").allowed  # the same name elsewhere


@pytest.mark.parametrize("build", JOBS)
def test_a_job_created_without_the_queue_label_is_refused_naming_the_label(build):
    verdict = create(build(labels={"team": NS}))
    assert verdict.denials == (
        "A training job in team namespace maps waits in Gangway's queue: add the label gangway.io/queue: maps "
        "(and create it suspended).",
    )
    assert not create(build(labels={})).allowed  # metadata.labels absent altogether


@pytest.mark.parametrize("build", JOBS)
@pytest.mark.parametrize("suspend", [False, None], ids=["suspend false", "no suspend field"])
def test_a_job_created_running_is_refused_saying_where_it_suspends(build, suspend):
    verdict = create(build(suspend=suspend))
    assert verdict.denials == (
        "A training job in team namespace maps must be created suspended (spec.runPolicy.suspend: true; "
        "spec.suspend: true for a TrainJob): Gangway unsuspends it when it is admitted.",
    )


def test_a_trainjob_suspends_in_spec_suspend_and_the_kubeflow_kinds_in_run_policy():
    wrong_field = trainjob(suspend=None)
    wrong_field["spec"]["runPolicy"] = {"suspend": True}  # a TFJob's field on a TrainJob suspends nothing
    assert not create(wrong_field).allowed
    wrong_field = tfjob(suspend=None)
    wrong_field["spec"]["suspend"] = True  # a TrainJob's field on a TFJob suspends nothing
    assert not create(wrong_field).allowed


@pytest.mark.parametrize("build", JOBS)
def test_unsuspending_a_waiting_job_is_refused_to_anyone_but_gangway(build):
    waiting = build()
    verdict = update(waiting, with_suspend(waiting, False))
    assert verdict.denials == (
        "Only Gangway unsuspends a training job in a team namespace, when it admits it; it is waiting in the queue.",
    )
    dropped = copy.deepcopy(waiting)  # removing the field unsuspends it too
    dropped["spec"].pop("suspend", None)
    dropped["spec"].get("runPolicy", {}).pop("suspend", None)
    assert not update(waiting, dropped).allowed
    assert update(waiting, with_suspend(waiting, False), user=GANGWAY).allowed


@pytest.mark.parametrize("build", JOBS)
def test_an_update_that_keeps_a_waiting_job_suspended_is_allowed(build):
    waiting = build()
    edited = copy.deepcopy(waiting)
    edited["metadata"]["labels"]["gangway.io/tier"] = "research"
    edited["metadata"]["annotations"] = {"note": "edited"}
    assert update(waiting, edited).allowed
    # Its owner may change what it asks while it waits: Gangway then rejects it, saying what changed.
    assert update(waiting, build(workers=4) if build is not trainjob else build(nodes=4)).allowed


def test_the_queue_label_is_required_at_create_only():
    # Taking it off later takes the job out of the queue: reconcile cancels its Gangway job, its object its
    # owner's again.
    waiting = tfjob()
    assert update(waiting, tfjob(labels={})).allowed


def test_deletes_and_status_writes_are_not_the_policys():
    running = tfjob(suspend=False)
    deleted = review(request(operation="DELETE", obj=None, old=running), None, running)
    assert not deleted.matched
    # The Training Operator, Kubeflow Trainer and Gangway's Failed mark write status through /status.
    for obj in (running, trainjob(suspend=False)):
        status = copy.deepcopy(obj)
        status["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
        req = request(operation="UPDATE", obj=status, old=obj, user="system:serviceaccount:kubeflow:training-operator",
                      subresource="status")  # fmt: skip
        assert not review(req, status, obj).matched


def test_a_wrong_expression_in_the_manifest_fails_these_tests():
    """The evaluator reads the manifest: a misspelt field or a condition turned around shows here."""
    spec = copy.deepcopy(policy()["spec"])
    spec["variables"][0]["expression"] = spec["variables"][0]["expression"].replace(
        "object.spec.runPolicy.suspend == true", "object.spec.runPolicy.suspnd == true")
    assert not create(tfjob(), spec=spec).allowed  # the misspelt field fails to evaluate: denied
    spec = copy.deepcopy(policy()["spec"])
    spec["validations"][0]["messageExpression"] = '"unclosed'
    with pytest.raises(PolicyError):
        create(tfjob(labels={}), spec=spec)
