"""Katib's Experiments over real HTTP to the fake API server: a sweep learns, at a reconcile pass, that its
experiment ended, how and when, and which trial was best with its metrics; an experiment still running says
nothing, and a cluster without Katib's Experiments is no error."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from jobs.models import Job, Sweep
from scheduling.cluster import outside
from scheduling.reconcile import reconcile
from tests.cluster.test_katib_trials import _trial, _trial_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)

BEST = "tune-lr-x7k2abcd"


def _experiment(conditions=(), *, best=None, strategies=None):
    objective = {"type": "maximize", "objectiveMetricName": "accuracy", "additionalMetricNames": ["loss"]}
    if strategies is not None:
        objective["metricStrategies"] = strategies
    status = {"conditions": list(conditions)}
    if conditions:
        status["completionTime"] = "2026-01-02T03:04:05Z"
    if best is not None:
        status["currentOptimalTrial"] = best
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
            "metadata": {"name": "tune-lr", "namespace": "maps"}, "spec": {"objective": objective},
            "status": status}  # fmt: skip


OPTIMAL = {"bestTrialName": BEST, "observation": {"metrics": [
    {"name": "loss", "min": "0.21", "max": "0.9", "latest": "0.25"},
    {"name": "accuracy", "min": "0.5", "max": "0.9312", "latest": "0.92"},
]}}  # fmt: skip
SUCCEEDED = [{"type": "Created", "status": "True"}, {"type": "Running", "status": "False"},
             {"type": "Succeeded", "status": "True", "reason": "ExperimentMaxTrialsReached"}]  # fmt: skip


def test_an_ended_experiment_reads_how_when_and_its_best_trial_with_its_metrics_the_objective_first():
    result = outside.experiment_result(_experiment(SUCCEEDED, best=OPTIMAL), "maps")
    assert (result.experiment, result.outcome, result.best_trial) == ("tune-lr", "Succeeded", BEST)
    assert result.ended_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    # The objective by its type's strategy (max, as maximized), another metric by its latest value.
    assert result.metrics == (("accuracy", 0.9312), ("loss", 0.25))


def test_a_metric_reads_by_the_strategy_the_experiment_gives_it():
    strategies = [{"name": "accuracy", "value": "latest"}, {"name": "loss", "value": "min"}]
    result = outside.experiment_result(_experiment(SUCCEEDED, best=OPTIMAL, strategies=strategies), "maps")
    assert result.metrics == (("accuracy", 0.92), ("loss", 0.21))


@pytest.mark.parametrize(("conditions", "outcome"), [
    pytest.param([{"type": "Running", "status": "True"}], None, id="a running experiment has not ended"),
    pytest.param([{"type": "Failed", "status": "True"}], "Failed", id="a failed experiment failed"),
    pytest.param([], None, id="an experiment without conditions has not ended"),
])  # fmt: skip
def test_an_experiment_ends_only_on_its_succeeded_or_failed_condition(conditions, outcome):
    result = outside.experiment_result(_experiment(conditions), "maps")
    assert (result.outcome if result else None) == outcome
    if result:
        assert result.best_trial == "" and result.metrics == ()  # Katib named no best trial


def test_a_pass_stores_how_the_sweep_s_experiment_ended_and_its_best_trial(world, fake, cluster):
    fake.add(_trial(BEST))
    fake.add(_trial_job(BEST))
    fake.add(_experiment([{"type": "Running", "status": "True"}]))
    reconcile(cluster=cluster)
    sweep = Sweep.objects.get(experiment="tune-lr")
    assert Job.objects.filter(sweep=sweep).count() == 1 and sweep.ended == "" and sweep.best_trial == ""

    fake.add(_experiment(SUCCEEDED, best=OPTIMAL))
    reconcile(cluster=cluster)

    sweep.refresh_from_db()
    assert sweep.ended == Sweep.Ending.SUCCEEDED
    assert sweep.ended_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert sweep.best_trial == BEST and sweep.best_metrics == [["accuracy", 0.9312], ["loss", 0.25]]
    listed = [path for method, path in fake.log if method == "GET" and path.endswith("/experiments")]
    assert listed and all("/namespaces/maps/" in path for path in listed)  # the team's namespace, never the cluster's


def test_a_sweep_whose_experiment_is_not_listed_learns_no_end(world, fake, cluster):
    fake.add(_trial(BEST))
    fake.add(_trial_job(BEST))
    reconcile(cluster=cluster)  # no Experiment of that name in the namespace
    sweep = Sweep.objects.get(experiment="tune-lr")
    assert sweep.ended == "" and sweep.ended_at is None


def test_a_metric_reported_as_nan_or_inf_is_left_out_and_the_ending_is_stored(world, fake, cluster):
    optimal = {"bestTrialName": BEST, "observation": {"metrics": [
        {"name": "loss", "min": "NaN", "max": "NaN", "latest": "NaN"},
        {"name": "accuracy", "min": "0.5", "max": "inf", "latest": "0.92"},
    ]}}  # fmt: skip
    fake.add(_trial(BEST))
    fake.add(_trial_job(BEST))
    fake.add(_experiment(SUCCEEDED, best=optimal))

    reconcile(cluster=cluster)  # PostgreSQL's JSON holds no NaN: one such metric stored failed every pass

    sweep = Sweep.objects.get(experiment="tune-lr")
    assert (sweep.ended, sweep.best_trial) == (Sweep.Ending.SUCCEEDED, BEST)
    assert sweep.best_metrics == []  # accuracy's max is inf: not a value (its latest is read only when unavailable)


def test_an_experiment_created_again_under_its_name_forgets_the_old_ending_at_its_first_new_trial(world, fake,
                                                                                                  cluster):  # fmt: skip
    fake.add(_trial(BEST))
    fake.add(_trial_job(BEST))
    fake.add(_experiment(SUCCEEDED, best=OPTIMAL))
    reconcile(cluster=cluster)
    assert Sweep.objects.get().ended == Sweep.Ending.SUCCEEDED

    # Deleted with its trials, then created again: a new trial's job arrives while the new run has not ended.
    fake.objects.pop(("apis/kubeflow.org/v1beta1", "experiments", "maps", "tune-lr"))
    fake.add(_experiment([{"type": "Running", "status": "True"}]))
    fake.add(_trial("tune-lr-n3wtrial"))
    fake.add(_trial_job("tune-lr-n3wtrial"))
    reconcile(cluster=cluster)

    sweep = Sweep.objects.get()
    assert (sweep.ended, sweep.ended_at, sweep.best_trial, sweep.best_metrics) == ("", None, "", [])
    assert Job.objects.filter(sweep=sweep).count() == 2
