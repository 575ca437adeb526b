"""The job page of a running job short of replicas (R13): why, and when it is evicted if it still is, while it
is; nothing once every replica runs again."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from jobs.models import Job
from scheduling.cluster import simulated
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.reconcile import reconcile

pytestmark = pytest.mark.django_db


@pytest.fixture
def short(submit, cycle) -> Job:
    """A job of two whole-node workers, running, one of them lost when node-01 was drained, with nowhere to go."""
    job = submit(name="wide", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], simulate={"duration": 7200})
    cycle()
    reconcile(cluster=SimulatedCluster(failure_rate=0))
    simulated.drain("node-01")
    reconcile(cluster=SimulatedCluster(failure_rate=0))
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.short_since is not None
    return job


def test_it_shows_why_a_running_job_short_of_a_replica_may_be_evicted(login, owner, short, htmx):
    body = login(owner).get(f"/jobs/{short.pk}/").content.decode()
    assert 'aria-label="Why it may be evicted"' in body
    assert escape(short.reason) in body
    assert "Only 1 of 2 replicas running: worker-0 waits to start" in body
    fragment = login(owner).get(f"/jobs/{short.pk}/", **htmx).content.decode()
    assert escape(short.reason) in fragment


def test_it_says_nothing_of_it_once_every_replica_runs_again(login, owner, short):
    simulated.cordon("node-01", schedulable=True)  # room for worker-0 again
    reconcile(cluster=SimulatedCluster(failure_rate=0))
    body = login(owner).get(f"/jobs/{short.pk}/").content.decode()
    assert "Why it may be evicted" not in body
    assert "All 2 replicas running again" in body  # on its timeline
