"""Katib's Trials on a flaky API server: a list answered with a spurious 404 says nothing of how a trial ended."""

from __future__ import annotations

from jobs.models import Job
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_katib_trials import _katib_removes, _trial, _trial_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

NOT_SERVED = "the server could not find the requested resource"
TRIAL_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "trials.kubeflow.org"}}  # fmt: skip


def test_a_trial_job_katib_removed_is_not_cancelled_when_the_trials_list_is_not_found_for_a_moment(world, fake,
                                                                                                   cluster):
    """Read as "Katib is not installed", the job of a trial that succeeded would be cancelled for good."""
    fake.add(TRIAL_CRD)
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.add(_trial(conditions=[{"type": "Succeeded", "status": "True"}]))
    _katib_removes(fake)
    fake.fail(404, method="GET", path="/trials$", message=NOT_SERVED)

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED
    assert result.error.startswith("list Trial *: 404 Not Found")
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED


def test_without_katib_installed_the_trials_list_is_empty(world, fake, cluster):
    assert cluster.trials() == []
