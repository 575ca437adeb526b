"""The job's logs are read once for all its viewers within a few seconds, by the page and the API alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Job
from scheduling import logs as job_logs_module
from scheduling.cluster.base import ClusterUnavailable
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.logs import FRESH_SECONDS, LOGS_CACHE, logs_key, recent_logs
from scheduling.models import SimJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_job(submit, cycle):
    job = submit(name="train", replicas=[{"role": "Worker", "count": 2, "gpu": 1}], simulate={"duration": 3600})
    cycle()
    SimJob.objects.filter(job_id=job.pk).update(started_at=SimJob.objects.get(job_id=job.pk).started_at - timedelta(seconds=300))
    job.refresh_from_db()
    return job


@pytest.fixture
def reads(monkeypatch):
    """The simulated cluster's log reads, counted: a list of (job id, replica, tail), one per read."""
    caches[LOGS_CACHE].clear()
    calls, read = [], SimulatedCluster.logs

    def counted(self, namespace, job_id, *, name="", replica="", tail=None, lines_of=None, **options):
        calls.append((job_id, replica, tail))
        return read(self, namespace, job_id, replica=replica, tail=tail, lines_of=lines_of, **options)

    monkeypatch.setattr(SimulatedCluster, "logs", counted)
    yield calls
    caches[LOGS_CACHE].clear()


@pytest.fixture
def later(monkeypatch):
    """Moves the logs' clock on by `seconds` (the clock recent_logs ages its kept read by)."""
    now = timezone.now

    class Clock:
        offset = timedelta()

        @classmethod
        def now(cls):
            return now() + cls.offset

    monkeypatch.setattr(job_logs_module, "timezone", Clock)

    def _later(seconds: float):
        Clock.offset += timedelta(seconds=seconds)

    return _later


def test_viewers_within_a_few_seconds_share_one_read(request, login, running_job, htmx, reads):
    for persona in ("owner", "member", "lead", "owner"):
        response = login(request.getfixturevalue(persona)).get(f"/jobs/{running_job.pk}/logs/", **htmx)
        assert response.status_code == 200 and "loss=" in response.content.decode()
    assert len(reads) == 1


def test_the_page_says_when_the_shown_logs_were_read(login, owner, running_job, htmx, reads):
    body = login(owner).get(f"/jobs/{running_job.pk}/logs/", **htmx).content.decode()
    assert "the last 30 lines of worker-0, read from the cluster <time datetime=" in body


def test_after_the_window_a_new_read_happens(login, owner, running_job, htmx, reads, later):
    client = login(owner)
    client.get(f"/jobs/{running_job.pk}/logs/", **htmx)
    later(FRESH_SECONDS - 1)
    client.get(f"/jobs/{running_job.pk}/logs/", **htmx)
    assert len(reads) == 1
    later(2)
    client.get(f"/jobs/{running_job.pk}/logs/", **htmx)
    assert len(reads) == 2


def test_a_failed_read_is_shared_too(login, owner, member, running_job, htmx, reads, monkeypatch):
    def unreachable(self, namespace, job_id, *, name="", replica="", tail=None, lines_of=None):
        reads.append((job_id, replica, tail))
        raise ClusterUnavailable("list Pod maps: cannot reach the API server")

    monkeypatch.setattr(SimulatedCluster, "logs", unreachable)
    for user in (owner, member):
        body = login(user).get(f"/jobs/{running_job.pk}/logs/", **htmx).content.decode()
        assert "The logs could not be read from the cluster: list Pod maps: cannot reach the API server" in body
    assert len(reads) == 1


def test_different_tails_or_replicas_do_not_share(running_job, reads):
    for _ in range(2):
        recent_logs(running_job, tail=30)
        recent_logs(running_job, tail=100)
        recent_logs(running_job, replica="worker-1", tail=30)
    assert sorted(reads) == sorted([(running_job.pk, "", 30), (running_job.pk, "", 100),
                                    (running_job.pk, "worker-1", 30)])  # fmt: skip


def test_the_api_shares_the_read_and_still_hides_the_job_from_outsiders(owner, outsider, running_job, reads):
    insider, stranger = APIClient(), APIClient()
    insider.force_authenticate(owner)
    stranger.force_authenticate(outsider)
    assert insider.get(f"/api/v1/jobs/{running_job.pk}/logs/?tail=5").status_code == 200
    assert stranger.get(f"/api/v1/jobs/{running_job.pk}/logs/?tail=5").status_code == 404
    assert insider.get(f"/api/v1/jobs/{running_job.pk}/logs/?tail=5").status_code == 200
    assert len(reads) == 1


def test_an_outsider_gets_no_logs_even_while_they_are_kept(login, owner, outsider, running_job, htmx, reads):
    assert login(owner).get(f"/jobs/{running_job.pk}/logs/", **htmx).status_code == 200
    response = login(outsider).get(f"/jobs/{running_job.pk}/logs/", **htmx)
    assert response.status_code == 404 and "loss=" not in response.content.decode()


def test_a_job_that_ended_is_read_afresh_once_and_stops_the_polling(login, owner, running_job, htmx, reads):
    client = login(owner)
    assert client.get(f"/jobs/{running_job.pk}/logs/", **htmx).status_code == 200
    Job.objects.filter(pk=running_job.pk).update(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    assert client.get(f"/jobs/{running_job.pk}/logs/", **htmx).status_code == 286  # htmx stops polling
    assert len(reads) == 2  # the running job's kept read is not the ended job's last answer


def test_a_viewer_arriving_during_a_read_gets_the_last_one(running_job, reads, later):
    first = recent_logs(running_job, tail=30)
    later(FRESH_SECONDS + 1)
    caches[LOGS_CACHE].add(logs_key(running_job, replica="", tail=30) + ":reading", True, 30)  # another viewer reads
    assert recent_logs(running_job, tail=30) == first and len(reads) == 1

