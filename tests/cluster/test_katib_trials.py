"""Katib trials over real HTTP to the fake API server: how a trial's job ends once Katib removed it,
and how often a reconcile pass lists Katib's Trials."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_outside_jobs import _deletes, outside_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

TRIAL = "tune-lr-x7k2abcd"


def _trial(name=TRIAL, conditions=()):
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
            "metadata": {"name": name, "namespace": "maps", "labels": {"katib.kubeflow.org/experiment": "tune-lr"}},
            "status": {"conditions": list(conditions)}}  # fmt: skip


def _trial_job(name=TRIAL):
    """A trial's job as Katib's trial controller creates it: no Katib label, only its Trial as owner."""
    owner = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": name, "controller": True}]
    return outside_job("PyTorchJob", name=name, gpu=1, ownerReferences=owner)


def _katib_removes(fake, name=TRIAL):
    fake.objects.pop(("apis/kubeflow.org/v1", "pytorchjobs", "maps", name))


def _trial_lists(fake) -> int:
    return len([path for method, path in fake.log if method == "GET" and path.endswith("/trials")])


OUTCOMES = [
    pytest.param([{"type": "EarlyStopped", "status": "True"}], Job.State.SUCCEEDED, "Early-stopped by Katib",
                 id="an early-stopped trial succeeded, early-stopped by Katib"),
    pytest.param([{"type": "MetricsUnavailable", "status": "True"}], Job.State.SUCCEEDED, "metrics were unavailable",
                 id="a trial without metrics succeeded, saying its metrics were unavailable"),
    pytest.param([{"type": "Succeeded", "status": "False", "reason": "MetricsUnavailable"}], Job.State.SUCCEEDED,
                 "metrics were unavailable", id="Katib before 0.16 says metrics unavailable with Succeeded False"),
    pytest.param([{"type": "Killed", "status": "True"}], Job.State.CANCELLED, "Killed by Katib",
                 id="a killed trial is cancelled by Katib"),
    pytest.param([{"type": "Failed", "status": "True"}], Job.State.FAILED, "Failed, as its Katib trial reports",
                 id="a failed trial failed"),
]  # fmt: skip


@pytest.mark.parametrize(("conditions", "state", "says"), OUTCOMES)
def test_a_trial_job_katib_removed_ends_as_its_trial_completed(world, fake, cluster, conditions, state, says):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.add(_trial(conditions=[{"type": "Running", "status": "False"}, *conditions]))
    _katib_removes(fake)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == state
    assert says in job.events.order_by("-pk")[1 if state == Job.State.CANCELLED else 0].message
    assert not job.events.filter(message__contains="deleted in the cluster").exists()
    assert _deletes(fake) == []


def test_a_waiting_trial_katib_killed_is_cancelled_by_katib(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)  # adopted, still queued
    fake.add(_trial(conditions=[{"type": "Killed", "status": "True"}]))
    _katib_removes(fake)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.CANCELLED
    assert job.events.filter(kind="cancel_requested", message__startswith="Killed by Katib").exists()


def test_a_trial_that_succeeded_before_its_job_was_admitted_is_cancelled_saying_why(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)  # adopted, still queued
    fake.add(_trial(conditions=[{"type": "Succeeded", "status": "True"}]))
    _katib_removes(fake)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.CANCELLED
    assert job.events.filter(message__contains="completed (Succeeded) before Gangway admitted it").exists()


def test_a_trial_that_succeeded_while_its_job_was_being_cancelled_ends_succeeded_saying_so(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    Job.objects.update(state=Job.State.CANCELLING, held_until_stopped=True)
    fake.add(_trial(conditions=[{"type": "Succeeded", "status": "True"}]))
    _katib_removes(fake)

    reconcile(cluster=cluster)

    job = Job.objects.get()
    assert (job.state, job.held_until_stopped) == (Job.State.SUCCEEDED, False)
    assert job.events.filter(message__startswith="Its cancel came after its Katib trial had completed (Succeeded)",
                             code="ended_before_cancel").exists()  # fmt: skip

def test_a_steady_pass_lists_the_trials_once(world, fake, cluster):
    for index in range(3):
        fake.add(_trial(f"tune-lr-abcd000{index}"))
        fake.add(_trial_job(f"tune-lr-abcd000{index}"))
    reconcile(cluster=cluster)
    assert Job.objects.filter(sweep__experiment="tune-lr").count() == 3
    fake.log.clear()

    reconcile(cluster=cluster)  # nothing new: the sweep's objective is still learnt

    assert _trial_lists(fake) == 1


def test_the_pass_that_adopts_new_trials_lists_the_trials_once(world, fake, cluster):
    for index in range(3):
        fake.add(_trial(f"tune-lr-abcd000{index}"))
        fake.add(_trial_job(f"tune-lr-abcd000{index}"))

    reconcile(cluster=cluster)

    assert _trial_lists(fake) == 1
    assert set(Job.objects.values_list("submitted_via", flat=True)) == {
        f"katib experiment tune-lr, trial tune-lr-abcd000{index}" for index in range(3)}  # fmt: skip


def test_no_trial_is_listed_once_no_sweep_has_open_trials(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    long_ago = timezone.now() - timedelta(hours=1)
    Job.objects.update(state=Job.State.SUCCEEDED, finished_at=long_ago)
    _katib_removes(fake)
    fake.log.clear()

    reconcile(cluster=cluster)

    assert _trial_lists(fake) == 0


def test_a_sweep_whose_last_trial_just_ended_still_learns_its_objective(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    Job.objects.update(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    fake.log.clear()

    reconcile(cluster=cluster)

    assert _trial_lists(fake) == 1


# -- where the Trials are listed: in the namespaces of Gangway's teams, never across the cluster --------------

CLUSTER_WIDE_TRIALS = r"^/apis/kubeflow\.org/v1beta1/trials$"


def _trials_listed(fake) -> list[tuple[str, tuple[str, ...]]]:
    return [(path, names) for path, names in fake.listed if path.endswith("/trials")]


def test_trials_are_listed_in_the_sweeps_team_namespace_and_another_tenants_are_never_read(world, fake, cluster):
    fake.add(_trial())
    fake.add(_trial_job())
    # Another tenant of the cluster runs Katib too, in a namespace that is no Gangway team's.
    fake.add({**_trial("their-sweep-x1"), "metadata": {"name": "their-sweep-x1", "namespace": "other-tenant",
                                                       "labels": {"katib.kubeflow.org/experiment": "their-sweep"}}})  # fmt: skip

    reconcile(cluster=cluster)
    reconcile(cluster=cluster)

    listed = _trials_listed(fake)
    assert listed and {path for path, _ in listed} == {"/apis/kubeflow.org/v1beta1/namespaces/maps/trials"}
    assert {name for _, names in listed for name in names} == {f"maps/{TRIAL}"}


def test_a_cluster_that_grants_the_trials_list_only_in_team_namespaces_still_ends_trials_as_katib_says(world, fake,
                                                                                                      cluster):
    """RBAC bound per team namespace (a RoleBinding) forbids a list of the whole cluster: 403."""
    fake.fail(403, method="GET", path=CLUSTER_WIDE_TRIALS, times=10**6,
              message='trials.kubeflow.org is forbidden: User "system:serviceaccount:gangway:gangway-scheduler" '
                      'cannot list resource "trials" in API group "kubeflow.org" at the cluster scope')  # fmt: skip
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    fake.add({**_trial(conditions=[{"type": "Succeeded", "status": "True"}]),
              "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"}},
              "status": {"conditions": [{"type": "Succeeded", "status": "True"}],
                         "observation": {"metrics": [{"name": "accuracy", "latest": "0.91", "max": "0.91",
                                                      "min": "0.9"}]}}})  # fmt: skip
    _katib_removes(fake)

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert result.error == "" and job.state == Job.State.SUCCEEDED
    assert "as its Katib trial reports" in job.events.last().message
    job.sweep.refresh_from_db()
    assert (job.sweep.objective, job.sweep.best_objective) == ("accuracy", 0.91)
