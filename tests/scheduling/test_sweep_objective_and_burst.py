"""A Katib sweep starting on a busy Monday: what its trials report, how they wait, what the pages say."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.adoption import adopt_outside_jobs
from scheduling.cluster import outside, outside_examples, simulated_outside


def _trial(*, type="maximize", strategies=None, metrics=()):
    objective = {"type": type, "objectiveMetricName": "accuracy"}
    if strategies is not None:
        objective["metricStrategies"] = strategies
    return {"spec": {"objective": objective}, "status": {"observation": {"metrics": list(metrics)}}}


ACCURACY = {"name": "accuracy", "min": "0.52", "max": "0.93", "latest": "0.91"}

OBJECTIVES = [
    pytest.param(_trial(metrics=[ACCURACY]), 0.93,
                 id="a maximized objective is its highest value, Katib's default strategy"),
    pytest.param(_trial(type="minimize", metrics=[{"name": "accuracy", "min": "0.12", "max": "0.9", "latest": "0.2"}]),
                 0.12, id="a minimized objective is its lowest value"),
    pytest.param(_trial(strategies=[{"name": "accuracy", "value": "latest"}], metrics=[ACCURACY]), 0.91,
                 id="the experiment's strategy for the objective wins"),
    pytest.param(_trial(strategies=[{"name": "loss", "value": "min"}, {"name": "accuracy", "value": "max"}],
                        metrics=[ACCURACY]), 0.93, id="a strategy of another metric is not the objective's"),
    pytest.param(_trial(metrics=[{"name": "accuracy", "min": "unavailable", "max": "unavailable", "latest": "0.8"}]),
                 0.8, id="an unavailable best value falls back to the latest, as Katib does"),
    pytest.param(_trial(metrics=[{"name": "accuracy", "min": "unavailable", "max": "unavailable",
                                  "latest": "unavailable"}]), None, id="no value yet is none"),
]  # fmt: skip


@pytest.mark.parametrize(("trial", "value"), OBJECTIVES)
def test_a_trials_objective_value_is_the_one_katib_ranks_it_by(trial, value):
    assert outside.objective_of(trial)[2] == value


def _tier_reads(queries) -> int:
    return sum(1 for query in queries if 'FROM "tenants_prioritytier"' in query["sql"])


def test_adopting_twenty_trials_at_once_reads_the_teams_tiers_once(maps, clock, cluster):
    for manifest in outside_examples.katib_trials(team="maps", experiment="tune-lr", trials=20, gpu=2):
        simulated_outside.add(manifest, now=clock())

    with CaptureQueriesContext(connection) as queries:
        adopted = adopt_outside_jobs(cluster=cluster, now=clock())

    assert adopted.adopted == 20
    assert _tier_reads(queries) <= 1  # was two per trial: its sweep's default tier, then the submission's check
