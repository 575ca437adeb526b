"""The cluster does not keep every job ever run: reconcile deletes the object (and so the pods) of a job
Gangway created once it ended more than ENDED_JOB_RETENTION ago. Before, every ended job's object
stayed, and every cycle and every reconcile listed them all: with 50,000 kept, a reconcile pass took
20 s and a cycle 6 s on the simulated cluster, passes meant to run every 5 s."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from jobs.models import Job, JobEvent
from scheduling import reconcile as reconciling
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.loop import admission_cycle
from scheduling.models import SimJob
from scheduling.reconcile import reconcile

DAY = 86400


@pytest.fixture
def ended(submit, cycle, clock):
    """Submits jobs that run for a minute and end (succeeded); returns them, in the order they ended."""

    def _ended(*names: str) -> list[Job]:
        jobs = []
        for name in names:
            job = submit(name=name, replicas=[{"role": "Worker", "count": 1, "gpu": 1}], simulate={"duration": 60})
            cycle()
            cycle()
            clock.tick(61)
            cycle()
            job.refresh_from_db()
            assert job.state == Job.State.SUCCEEDED
            jobs.append(job)
        return jobs

    return _ended


def kept(*jobs: Job) -> list[bool]:
    return [SimJob.objects.filter(job_id=job.pk).exists() for job in jobs]


@override_settings(ENDED_JOB_RETENTION=7 * DAY)
def test_a_job_ended_longer_ago_than_the_retention_loses_its_object_and_keeps_its_record(ended, cluster, clock):
    (job,) = ended("old")
    events = list(JobEvent.objects.filter(job=job).values_list("kind", flat=True))
    clock.tick(7 * DAY + 1)
    assert reconcile(cluster=cluster, now=clock()).deleted == 1
    assert kept(job) == [False]
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert list(JobEvent.objects.filter(job=job).values_list("kind", flat=True)) == events


@override_settings(ENDED_JOB_RETENTION=7 * DAY)
def test_a_job_ended_within_the_retention_keeps_its_object_for_its_logs(ended, cluster, clock):
    (job,) = ended("recent")
    clock.tick(7 * DAY - 60)
    assert reconcile(cluster=cluster, now=clock()).deleted == 0
    assert kept(job) == [True]


@override_settings(ENDED_JOB_RETENTION=0)
def test_no_retention_keeps_every_object(ended, cluster, clock):
    (job,) = ended("kept")
    clock.tick(365 * DAY)
    assert reconcile(cluster=cluster, now=clock()).deleted == 0
    assert kept(job) == [True]


@override_settings(ENDED_JOB_RETENTION=DAY)
def test_a_backlog_goes_a_bounded_number_a_pass_the_longest_ended_first(ended, cluster, clock, monkeypatch):
    monkeypatch.setattr(reconciling, "EXPIRED_PER_PASS", 2)
    first, second, third = ended("first", "second", "third")
    clock.tick(DAY + 1)
    assert reconcile(cluster=cluster, now=clock()).deleted == 2
    assert kept(first, second, third) == [False, False, True]
    assert reconcile(cluster=cluster, now=clock()).deleted == 1
    assert kept(third) == [False]


@override_settings(ENDED_JOB_RETENTION=DAY)
def test_an_adopted_jobs_object_is_its_owners_and_never_deleted(maps, cluster, cycle, clock):
    simulated_outside.add(outside_examples.kubectl_job(team="maps", name="bert-pretrain", user="alice"), now=clock())
    cycle()
    job = Job.objects.get(cluster_name="bert-pretrain")
    cycle()
    clock.tick(DAY)  # the simulated kubectl job runs for its default duration, then ends
    cycle()
    job.refresh_from_db()
    assert job.is_terminal and job.adopted
    clock.tick(DAY + 1)
    assert reconcile(cluster=cluster, now=clock()).deleted == 0
    assert kept(job) == [True]


def test_the_simulated_cluster_reads_the_outcome_of_ended_jobs_never_their_manifests(ended, cluster, clock):
    """It keeps ended jobs as a cluster does, for as long as the retention: a reconcile and a cycle read
    their outcomes alone, not their manifests (kilobytes of JSON each); nor those of the jobs that have
    not ended, whose pods' needs are on their rows."""
    ended("done")
    with CaptureQueriesContext(connection) as queries:
        reconcile(cluster=cluster, now=clock())
        admission_cycle(cluster=cluster, now=clock())
    reads = [query["sql"] for query in queries
             if query["sql"].startswith("SELECT") and '"scheduling_simjob"."manifest"' in query["sql"]]  # fmt: skip
    assert reads == []
