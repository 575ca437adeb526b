"""A running adopted job its owner suspends in the cluster (`kubectl patch ... suspend: true`, which the admission
policy allows) is stopped by its owner, who means it: Gangway never resumes it, its nodes and its team's quota are
free at once, and its object is its owner's again. Gangway's own suspends (a preemption, a cancel) are not taken
for its owner's. Over real HTTP to the fake API server, through the adapter, reconcile and the loop."""

from __future__ import annotations

import pytest

from jobs.codes import Because
from jobs.models import Job
from jobs.services import job_cancel, job_submit
from jobs.spec import parse_spec
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import outside_job, preempt_for_urgent_work, world  # noqa: F401 (fixture)
from tests.cluster.test_refused_victims import victim  # noqa: F401 (fixture)
from tests.conftest import spec_data

pytestmark = pytest.mark.django_db


def _owner_suspends(fake) -> None:
    """Its owner suspends the running object and changes nothing else; the operator deletes its pods."""
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    obj["spec"]["runPolicy"]["suspend"] = True
    obj["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    fake.add(obj)
    for key in [key for key in fake.objects if key[1] == "pods"]:
        fake.objects.pop(key)


def _object(fake) -> dict:
    return fake.get("TFJob", "bert-kubectl", "maps")


def _suspended(fake) -> bool:
    return _object(fake)["spec"]["runPolicy"]["suspend"] is True


def test_a_running_job_its_owner_suspends_stays_suspended_and_gives_back_its_quota(world, fake, cluster, victim):
    job = victim  # adopted, running 2 Workers of 4 GPUs on n1
    _owner_suspends(fake)

    reconcile(cluster=cluster)

    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED and _suspended(fake)
    assert job.placement == ["n1", "n1"]  # its page says where it ran; nothing counts an ended job's nodes
    said = [event.message for event in job.events.order_by("pk")]
    assert ("Stopped by its owner: its TFJob maps/bert-kubectl was suspended in the cluster while it ran. Gangway "
            "leaves it suspended; its nodes and its team's quota are free.") in said  # fmt: skip
    assert said[-1].startswith("Cancelled: its owner suspended it. To run it again, delete its TFJob and create it "
                               "again suspended, with the label gangway.io/queue: maps")  # fmt: skip
    kinds = [event.kind for event in job.events.order_by("pk")]
    assert "preempted" not in kinds and "evicted" not in kinds  # nobody preempted it
    [event] = fake.list("Event")  # its owner is told on the object, which stays as they left it
    assert (event["type"], event["reason"], event["involvedObject"]["name"]) == ("Normal", "GangwayReleased",
                                                                                "bert-kubectl")  # fmt: skip
    assert event["message"].startswith(f"Gangway no longer counts this job (Gangway job #{job.pk}): it was "
                                       "suspended while it ran")  # fmt: skip
    other, _ = job_submit(team=world["maps"], spec=parse_spec(spec_data(
        team="maps", name="other", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])))  # fmt: skip
    admission_cycle(cluster=cluster)
    other.refresh_from_db()
    assert other.state == Job.State.ADMITTED  # the node and the quota the stopped job held are free


def test_an_event_the_cluster_refuses_still_lets_the_job_go(world, fake, cluster, victim):
    _owner_suspends(fake)
    fake.fail(403, method="POST", path="/events$", times=10**6)

    reconcile(cluster=cluster)

    victim.refresh_from_db()
    assert victim.state == Job.State.CANCELLED and fake.list("Event") == []


def test_a_job_its_owner_suspended_is_left_as_its_owner_left_it_at_later_passes(world, fake, cluster, victim):
    _owner_suspends(fake)
    reconcile(cluster=cluster)
    patches = len([method for method, _ in fake.log if method == "PATCH"])

    for _ in range(2):
        admission_cycle(cluster=cluster)
        reconcile(cluster=cluster)

    victim.refresh_from_db()
    assert victim.state == Job.State.CANCELLED and _suspended(fake)
    assert len([method for method, _ in fake.log if method == "PATCH"]) == patches  # never resumed nor marked
    assert not any(condition["type"] == "Failed" for condition in _object(fake)["status"]["conditions"])


def test_a_victim_gangway_suspends_is_requeued_not_taken_for_its_owners_suspend(world, fake, cluster, victim):
    later = preempt_for_urgent_work(world, cluster)  # a cycle preempts it and suspends its object
    assert _suspended(fake)

    reconcile(cluster=cluster, now=later)

    victim.refresh_from_db()
    assert victim.state == Job.State.QUEUED
    assert not victim.events.filter(code=Because.SUSPENDED_OUTSIDE).exists()


def test_a_job_cancelled_in_gangway_is_not_taken_for_one_its_owner_suspended(world, fake, cluster, victim):
    job_cancel(job=victim)

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    victim.refresh_from_db()
    assert victim.state == Job.State.CANCELLED and _suspended(fake)
    assert not victim.events.filter(code=Because.SUSPENDED_OUTSIDE).exists()
    failed = [c for c in _object(fake)["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "GangwayCancelled"  # a person's cancel ends it there too


def _gangway_suspended_then_rolled_back(fake, *, gpu: int | None = None) -> None:
    """Gangway's suspend landed (its mark with it) but the database write that went with it rolled back, so the
    job still runs in the database; with `gpu`, its owner then asks that many GPUs a Worker."""
    obj = fake.get("TFJob", "bert-kubectl", "maps")
    obj["metadata"].setdefault("annotations", {})["gangway.io/suspended-by"] = "gangway"
    obj["spec"]["runPolicy"]["suspend"] = True
    if gpu is not None:
        obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][
            "nvidia.com/gpu"] = gpu
    obj["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    fake.add(obj)
    for key in [key for key in fake.objects if key[1] == "pods"]:
        fake.objects.pop(key)


def test_gangways_suspend_carries_its_mark(world, fake, cluster, victim):
    preempt_for_urgent_work(world, cluster)  # a cycle preempts it and suspends its object

    annotations = _object(fake)["metadata"].get("annotations") or {}
    assert _suspended(fake) and annotations.get("gangway.io/suspended-by") == "gangway"


def test_a_suspend_of_gangways_whose_database_write_rolled_back_is_resumed_not_taken_for_its_owners(
        world, fake, cluster, victim):  # fmt: skip
    _gangway_suspended_then_rolled_back(fake)

    reconcile(cluster=cluster)

    victim.refresh_from_db()
    assert victim.state == Job.State.RUNNING and not _suspended(fake)
    assert not victim.events.filter(code=Because.SUSPENDED_OUTSIDE).exists()
    assert "gangway.io/suspended-by" not in (_object(fake)["metadata"].get("annotations") or {})


def test_one_suspended_by_gangway_then_changed_by_its_owner_is_rejected_not_resumed(world, fake, cluster, victim):
    _gangway_suspended_then_rolled_back(fake, gpu=8)

    reconcile(cluster=cluster)

    victim.refresh_from_db()
    assert (victim.state, victim.reason_code) == (Job.State.REJECTED, "changed_outside")
    assert _suspended(fake)
