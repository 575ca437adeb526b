"""A list of one adopted kind that fails (a spurious 404, as API servers answer for custom resources
now and then) says nothing of that kind's jobs: none is judged gone, and the other kinds are read."""

from __future__ import annotations

from jobs.models import Job
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import _deletes, outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

TFJOBS = "^/apis/kubeflow.org/v1/tfjobs$"


def test_a_spurious_404_on_a_kinds_list_cancels_none_of_its_jobs(world, fake, cluster):
    fake.add(outside_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.fail(404, method="GET", path=TFJOBS, times=1, message="the server could not find the requested resource")

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED
    assert not job.events.filter(kind="cancel_requested").exists()
    assert fake.get("TFJob", "bert-kubectl", "maps")["spec"]["runPolicy"]["suspend"] is False
    assert _deletes(fake) == []


def test_the_listing_says_which_kinds_it_read(world, fake, cluster):
    fake.add(outside_job())
    fake.add(outside_job("PyTorchJob", name="tune"))
    fake.fail(404, method="GET", path=TFJOBS, times=1)

    found = cluster.outside_jobs()

    assert "TFJob" not in found.kinds and "PyTorchJob" in found.kinds
    assert [(job.kind, job.name) for job in found.jobs] == [("PyTorchJob", "tune")]


def test_a_job_of_a_listed_kind_deleted_meanwhile_is_still_cancelled(world, fake, cluster):
    fake.add(outside_job())
    fake.add(outside_job("PyTorchJob", name="tune"))
    reconcile(cluster=cluster)
    fake.objects.pop(("apis/kubeflow.org/v1", "pytorchjobs", "maps", "tune"))  # its owner deletes it
    fake.fail(404, method="GET", path=TFJOBS, times=1)

    reconcile(cluster=cluster)

    assert dict(Job.objects.values_list("cluster_name", "state")) == {
        "bert-kubectl": Job.State.QUEUED, "tune": Job.State.CANCELLED}  # fmt: skip
