"""A job from elsewhere that Gangway refuses, or that a person cancels in Gangway, is marked Failed, so that
what waits on it does not wait for ever.

Katib counts a trial whose job stays suspended as running: it holds one of the experiment's
`parallelTrialCount` places for ever, and a sweep whose trials Gangway refuses would stall with
every place taken. A `Failed` condition in the job's status, which the Training Operator keeps on
a finished job, fails the trial (Katib's default failure condition) and its place goes to the next.
Over real HTTP to the fake API server, which writes a status only through the status subresource.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from jobs.models import Job
from jobs.services import job_cancel
from scheduling.cluster import outside
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import _deletes, outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)
from tests.cluster.test_outside_trainjobs import outside_trainjob

TRIAL_OWNER = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": "tune-lr-x7k2", "controller": True}]
STATUS = r"/tfjobs/[^/]+/status$"


def _refused_trial(fake, world, tiers, *, conditions=()):
    """A Katib trial's TFJob asking for a tier team maps may not use, as Katib creates it; returns its name."""
    world["maps"].tiers.set([tiers["standard"]])
    job = outside_job(name="tune-lr-x7k2", gpu=1, labels={"gangway.io/tier": "production"},
                      ownerReferences=TRIAL_OWNER)  # fmt: skip
    if conditions:
        job["status"] = {"conditions": list(conditions)}
    fake.add(job)
    return "tune-lr-x7k2"


def _conditions(fake, name, kind="TFJob"):
    return (fake.get(kind, name, "maps").get("status") or {}).get("conditions") or []


def _failed(fake, name, kind="TFJob"):
    return [c for c in _conditions(fake, name, kind) if c["type"] == "Failed" and c["status"] == "True"]


def _status_patches(fake):
    return [path for method, path in fake.log if method == "PATCH" and path.endswith("/status")]


def test_a_refused_trial_is_marked_failed_with_the_refusal_as_its_message(world, fake, cluster, tiers):
    suspended = {"type": "Suspended", "status": "True", "reason": "TFJobSuspended", "message": "suspended"}
    name = _refused_trial(fake, world, tiers, conditions=[suspended])

    result = reconcile(cluster=cluster)

    assert result.refused == 1 and not Job.objects.exists()
    [failed] = _failed(fake, name)
    assert failed["reason"] == "GangwayRejected"
    assert failed["message"] == fake.get("TFJob", name, "maps")["metadata"]["annotations"]["gangway.io/rejected"]
    assert "may not use tier 'production'" in failed["message"]
    assert failed["lastTransitionTime"].endswith("Z")
    assert _conditions(fake, name)[0] == suspended  # the operator's conditions stay, the failure comes last
    assert fake.get("TFJob", name, "maps")["spec"]["runPolicy"]["suspend"] is True  # never started
    assert _deletes(fake) == []


def test_a_refused_job_is_marked_once(world, fake, cluster, tiers):
    name = _refused_trial(fake, world, tiers)
    reconcile(cluster=cluster)
    fake.log.clear()

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert len(_failed(fake, name)) == 1
    assert _status_patches(fake) == [] and len(fake.list("Event")) == 1


def test_a_job_a_cycle_rejects_is_marked_failed_too(world, fake, cluster):
    fake.add(outside_job(gpu=8, replicas=2))  # 16 GPUs: no cycle has read the nodes yet, the first rejects it
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.REJECTED
    [failed] = _failed(fake, "bert-kubectl")
    assert failed["message"] == f"Refused by Gangway: {job.reason}"
    assert _deletes(fake) == []
    [told] = job.events.filter(code="marked_failed")  # its timeline says so, once
    assert told.message == ("Its TFJob bert-kubectl was marked Failed in the cluster, so that whatever waits on it "
                            "sees it end instead of waiting for it for ever.")  # fmt: skip
    reconcile(cluster=cluster)
    assert job.events.filter(code="marked_failed").count() == 1


@pytest.mark.parametrize("code", [500, 403])
def test_a_status_the_server_would_not_write_is_marked_at_the_next_pass(world, fake, cluster, tiers, code):
    name = _refused_trial(fake, world, tiers)
    fake.fail(code, path=STATUS, method="PATCH", times=10)

    first = reconcile(cluster=cluster)  # annotated and told in an event; the status is refused

    assert not first.error and first.refused == 1  # the pass went on
    assert fake.get("TFJob", name, "maps")["metadata"]["annotations"]["gangway.io/rejected"]
    assert _failed(fake, name) == []
    fake.heal()

    reconcile(cluster=cluster)

    assert len(_failed(fake, name)) == 1
    assert len(fake.list("Event")) == 1  # the refusal is told once


def test_an_operator_writing_the_status_meanwhile_is_not_overwritten(world, fake, cluster, tiers):
    name = _refused_trial(fake, world, tiers)
    created = {"type": "Created", "status": "True", "reason": "TFJobCreated", "message": "created"}

    def operator_writes():
        obj = fake.get("TFJob", name, "maps")
        obj["status"] = {"conditions": [created]}
        fake.add(obj)

    fake.before(operator_writes, path=STATUS, method="PATCH")

    reconcile(cluster=cluster)

    # The first patch, built before the operator's write, answered 409: the second was built on it.
    assert [c["type"] for c in _conditions(fake, name)] == ["Created", "Failed"]
    assert len(_status_patches(fake)) == 2


def test_a_job_that_finished_meanwhile_is_left_as_it_is(world, fake, cluster, tiers):
    succeeded = {"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded", "message": "done"}
    name = _refused_trial(fake, world, tiers)

    def operator_finishes():
        obj = fake.get("TFJob", name, "maps")
        obj["status"] = {"conditions": [succeeded]}
        fake.add(obj)

    fake.before(operator_finishes, path=r"/tfjobs/tune-lr-x7k2$", method="GET")

    reconcile(cluster=cluster)

    assert _conditions(fake, name) == [succeeded] and _status_patches(fake) == []


def test_a_job_refused_before_it_was_marked_failed_is_marked_without_a_second_event(world, fake, cluster, tiers):
    """A job refused by an earlier Gangway, which only annotated it, fails at the next pass."""
    name = _refused_trial(fake, world, tiers)
    obj = fake.get("TFJob", name, "maps")
    obj["metadata"]["annotations"] = {"gangway.io/rejected": "Refused by Gangway: an earlier refusal."}
    fake.add(obj)

    reconcile(cluster=cluster)

    [failed] = _failed(fake, name)
    assert failed["message"] == "Refused by Gangway: an earlier refusal."
    assert fake.list("Event") == []


def test_a_refused_trainjob_is_only_annotated(world, fake, cluster, tiers):
    """Kubeflow Trainer works a TrainJob's status out again from its JobSet: a condition written there is lost."""
    world["maps"].tiers.set([tiers["standard"]])
    fake.add(outside_trainjob(labels={"gangway.io/tier": "production"}))

    reconcile(cluster=cluster)

    assert fake.get("TrainJob", "llama-kubectl", "maps")["metadata"]["annotations"]["gangway.io/rejected"]
    assert _status_patches(fake) == []
    reconcile(cluster=cluster)
    assert _status_patches(fake) == []


@pytest.mark.parametrize("admitted", [True, False], ids=["admitted", "queued"])
def test_a_pipelines_step_cancelled_in_gangway_is_marked_failed_so_its_run_ends(world, fake, cluster, staff,
                                                                               admitted):  # fmt: skip
    fake.add(outside_job(labels={"pipeline/runid": "5c1f0e"}))
    reconcile(cluster=cluster)
    if admitted:
        admission_cycle(cluster=cluster)
    job = Job.objects.get()

    job_cancel(job=job, actor=staff)
    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    assert Job.objects.get().state == Job.State.CANCELLED
    [failed] = _failed(fake, "bert-kubectl")
    assert (failed["reason"], failed["message"]) == ("GangwayCancelled", f"Cancelled in Gangway (job #{job.pk}).")
    assert fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is True
    assert "gangway.io/rejected" not in (fake.get("TFJob", "bert-kubectl", "maps")["metadata"].get("annotations") or {})
    assert fake.list("Event") == [] and _deletes(fake) == []
    [told] = job.events.filter(code="marked_failed")
    assert "so that its Pipelines step fails its run" in told.message
    fake.log.clear()
    reconcile(cluster=cluster)
    assert _status_patches(fake) == []  # marked once


@pytest.mark.parametrize("ended", ["Succeeded", "Failed"])
def test_a_pipelines_step_that_ended_before_its_cancel_landed_ends_as_it_did_and_is_not_marked(world, fake, cluster,
                                                                                               staff, ended):  # fmt: skip
    fake.add(outside_job(labels={"pipeline/runid": "5c1f0e"}))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    job = job_cancel(job=Job.objects.get(), actor=staff)
    said = f"TFJob maps/bert-kubectl {ended.lower()}: the operator says so."
    fake.objects[("apis/kubeflow.org/v1", "tfjobs", "maps", "bert-kubectl")]["status"] = {"conditions": [
        {"type": ended, "status": "True", "reason": f"TFJob{ended}", "message": said}]}  # fmt: skip
    fake.log.clear()

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    job.refresh_from_db()
    assert job.state == ended.lower() and job.events.get(kind=ended.lower()).message == f"{ended}: {said}"
    assert not [c for c in _conditions(fake, "bert-kubectl") if c.get("reason") == "GangwayCancelled"]
    assert _status_patches(fake) == [] and _deletes(fake) == []
    assert not job.events.filter(code="marked_failed").exists()


def test_a_job_still_queued_or_running_is_never_marked(world, fake, cluster):
    fake.add(outside_job(name="queued"))
    fake.add(outside_job(name="running"))
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    reconcile(cluster=cluster)

    assert sorted(Job.objects.values_list("state", flat=True)) == [Job.State.ADMITTED, Job.State.QUEUED]
    assert _status_patches(fake) == []


def test_the_failure_says_when_the_job_ended_as_the_operator_does():
    """The Training Operator applies ttlSecondsAfterFinished from completionTime, and cannot clean up a
    finished job without one."""
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    patch = outside.failure_patch({"metadata": {"resourceVersion": "7"}, "status": {"conditions": []}}, "x", at)
    assert patch["status"]["completionTime"] == "2026-01-01T00:00:00Z"
    kept = outside.failure_patch({"metadata": {}, "status": {"completionTime": "2025-12-31T00:00:00Z"}}, "x", at)
    assert "completionTime" not in kept["status"]  # one it has stays


def test_a_new_object_created_under_the_name_of_a_cancelled_one_is_not_marked(world, fake, cluster, staff):
    """Its owner deletes and creates it again (kubectl delete -f, create -f) between the pass's list and
    the mark: the new object is not the job Gangway cancelled."""
    fake.add(outside_job())
    reconcile(cluster=cluster)
    job_cancel(job=Job.objects.get(), actor=staff)
    old = fake.get("TFJob", "bert-kubectl", "maps")["metadata"]["uid"]

    def recreate():
        fake.objects.pop(next(key for key in fake.objects if key[1:] == ("tfjobs", "maps", "bert-kubectl")))
        fake.add(outside_job())

    fake.before(recreate, path=r"/tfjobs/bert-kubectl$", method="GET")

    reconcile(cluster=cluster)

    assert fake.get("TFJob", "bert-kubectl", "maps")["metadata"]["uid"] != old
    assert _failed(fake, "bert-kubectl") == [] and _status_patches(fake) == []
    assert not Job.objects.get().events.filter(code="marked_failed").exists()


@pytest.mark.parametrize("admitted", [False, True], ids=["queued", "running"])
def test_a_job_taken_out_of_the_queue_and_put_back_is_never_marked(world, fake, cluster, admitted):
    """Cancelled here as it left the queue (its owner's again, `handed_back.given_back`), not by a person:
    put back in the queue, it is listed again, and still nobody cancelled it in Gangway."""
    fake.add(outside_job())
    reconcile(cluster=cluster)
    if admitted:
        admission_cycle(cluster=cluster)
        reconcile(cluster=cluster)
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    del obj["metadata"]["labels"]["gangway.io/queue"]
    fake.add(obj)
    reconcile(cluster=cluster)
    assert Job.objects.get().events.filter(code="deleted_outside").exists()
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    obj["metadata"]["labels"]["gangway.io/queue"] = "maps"
    fake.add(obj)
    fake.log.clear()

    reconcile(cluster=cluster)

    assert _failed(fake, "bert-kubectl") == [] and _status_patches(fake) == []


def test_a_copy_of_a_refused_job_is_judged_anew(world, fake, cluster, tiers):
    """`kubectl get -o yaml` of a refused job, its tier fixed, created again: the refusal it carries was
    written on another object, so it is adopted, not taken for refused (nor marked Failed)."""
    name = _refused_trial(fake, world, tiers)
    reconcile(cluster=cluster)
    copy = fake.get("TFJob", name, "maps")
    assert copy["metadata"]["annotations"]["gangway.io/rejected-uid"] == copy["metadata"]["uid"]
    fake.objects.pop(next(key for key in fake.objects if key[1:] == ("tfjobs", "maps", name)))
    copy["metadata"] = {key: value for key, value in copy["metadata"].items()
                        if key not in ("uid", "resourceVersion", "creationTimestamp")}  # fmt: skip
    copy["metadata"]["labels"]["gangway.io/tier"] = "standard"
    del copy["status"]
    fake.add(copy)

    result = reconcile(cluster=cluster)

    assert result.adopted == 1 and Job.objects.get().tier.name == "standard"
    assert _failed(fake, name) == []
