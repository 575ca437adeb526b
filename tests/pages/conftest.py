"""Fixtures for the page tests: a logged-in client per persona and a cluster the loop has read."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Sweep
from portal import live
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile


@pytest.fixture(autouse=True)
def still_clock(monkeypatch):
    """Live parts' clock held at the minute a test starts, moved only by the test (`still_clock.turn()`):
    a test that polls twice across a minute's turn would otherwise see a part read again, or a 200."""

    class Clock:
        step = live.minute()

        def turn(self):
            self.step += 1

    clock = Clock()
    monkeypatch.setattr(live, "minute", lambda: clock.step)
    return clock


@pytest.fixture
def htmx():
    """Headers of an htmx request."""
    return {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def csrf_client():
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def fill_and_wait(submit, cycle):
    """Fill both nodes with one running job of maps, then queue `count` jobs of 8 GPUs that must wait."""

    def _fill(count: int = 1, prefix: str = "waiting", **kwargs):
        submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], **kwargs)
        cycle()
        jobs = [submit(name=f"{prefix}-{i}", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], **kwargs)
                for i in range(count)]  # fmt: skip
        cycle()
        for job in jobs:
            job.refresh_from_db()
        return jobs

    return _fill


def katib_sweep(experiment: str, *, trials: int, gpu: int) -> Sweep:
    """Katib starts `trials` trials of `gpu` GPUs each for `experiment` in team maps; one reconcile adopts
    them and one admission cycle admits what the sweep's cap and the cluster allow. Returns the sweep."""
    for manifest in outside_examples.katib_trials(team="maps", experiment=experiment, trials=trials, gpu=gpu):
        simulated_outside.add(manifest, now=timezone.now())
    cluster = SimulatedCluster(failure_rate=0)
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    return Sweep.objects.get(experiment=experiment)


@pytest.fixture
def sweep(maps, nodes):
    """Experiment tune-lr of team maps: 4 trials of 4 GPUs under the team's cap of 8 (two run, two wait)."""
    return katib_sweep("tune-lr", trials=4, gpu=4)
