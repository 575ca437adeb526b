"""Katib's Trials over real HTTP to the fake API server, when their list fails: refused (a missing
permission) or answered with a spurious 404 (a flaky API server). They only add to what reconcile
knows, so the rest of it goes on, and a trial's job is never judged on a list that said nothing."""

from __future__ import annotations

from jobs.models import Job, Sweep
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_katib_trials import TRIAL, _katib_removes, _trial, _trial_job
from tests.cluster.test_outside_jobs import _deletes, outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

TRIALS = r".*/trials$"
NOT_SERVED = "the server could not find the requested resource"
TRIAL_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "trials.kubeflow.org"}}  # fmt: skip


def _labelled_trial_job(name=TRIAL):
    """A trial's job whose template labels it with its experiment and trial (no Trial needs reading)."""
    return outside_job("PyTorchJob", name=name, gpu=1, labels={"katib.kubeflow.org/experiment": "tune-lr",
                                                               "katib.kubeflow.org/trial": name})  # fmt: skip


def _trial_succeeded_and_katib_removed_its_job(fake, cluster) -> None:
    """A trial's job adopted and admitted; then its Trial succeeded and Katib deleted the job."""
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.add(_trial(conditions=[{"type": "Succeeded", "status": "True"}]))
    _katib_removes(fake)


def test_a_refused_trial_list_does_not_stop_reconcile(world, fake, cluster):
    fake.add(_trial())
    fake.add(_labelled_trial_job())
    fake.add(outside_job(name="bert-kubectl", gpu=1))
    fake.fail(403, path=TRIALS, times=100)

    first = reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    second = reconcile(cluster=cluster)

    assert (first.adopted, first.error, second.error) == (2, "", "")
    assert set(Job.objects.values_list("state", flat=True)) == {Job.State.ADMITTED}
    assert Job.objects.get(name=TRIAL).sweep == Sweep.objects.get(experiment="tune-lr")


def test_a_new_trial_whose_trials_cannot_be_read_is_adopted_into_the_sweep_its_name_gives(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())  # Katib labels only its Trial: the experiment is the Trial's, else its name's
    fake.fail(403, path=TRIALS, times=100)

    result = reconcile(cluster=cluster)

    assert (result.adopted, result.error) == (1, "")
    assert Job.objects.get().sweep.experiment == "tune-lr"


def test_a_trial_job_katib_removed_waits_to_be_judged_until_its_trial_can_be_read(world, fake, cluster):
    _trial_succeeded_and_katib_removed_its_job(fake, cluster)
    fake.fail(403, path=TRIALS, times=100)

    assert reconcile(cluster=cluster).error == ""
    assert Job.objects.get().state == Job.State.ADMITTED  # not cancelled as if its owner had deleted it

    fake.heal()
    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.SUCCEEDED and "as its Katib trial reports" in job.events.last().message
    assert _deletes(fake) == []


def test_a_trial_job_katib_removed_is_not_cancelled_when_the_trials_list_is_not_found_for_a_moment(world, fake,
                                                                                                   cluster):
    """Read as "Katib is not installed", the job of a trial that succeeded would be cancelled for good."""
    fake.add(TRIAL_CRD)
    _trial_succeeded_and_katib_removed_its_job(fake, cluster)
    fake.fail(404, method="GET", path="/trials$", message=NOT_SERVED)

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED
    assert result.error.startswith("list Trial maps: 404 Not Found")
    reconcile(cluster=cluster)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED


def test_without_katib_installed_the_trials_list_is_empty(world, fake, cluster):
    assert cluster.trials("maps") == []
