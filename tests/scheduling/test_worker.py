"""A real Celery worker on Redis runs the loop: a submitted job reaches the end by itself."""

from __future__ import annotations

import time

import pytest

from jobs.models import Job
from scheduling.tasks import admission_cycle, reconcile
from tests.workers import celery_worker


@pytest.fixture
def worker(transactional_db):
    """A worker process on the test database and the test Redis, stopped afterwards."""
    with celery_worker() as process:
        yield process


@pytest.mark.worker
def test_a_worker_takes_a_job_from_queued_to_succeeded(worker, submit, nodes):
    job = submit(simulate={"duration": 2})
    deadline = time.monotonic() + 90
    seen = []
    while time.monotonic() < deadline:
        admission_cycle.delay()
        reconcile.delay()
        time.sleep(1)
        state = Job.objects.get(pk=job.pk).state
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "succeeded":
            break
        assert worker.poll() is None, worker.stdout.read()
    assert seen[-1] == "succeeded", seen
    assert {"admitted", "running"} & set(Job.objects.get(pk=job.pk).events.values_list("kind", flat=True))


@pytest.mark.worker
def test_a_worker_answers_a_ping(worker):
    from scheduling.tasks import ping

    assert ping.apply_async(ignore_result=False).get(timeout=60) == "pong"
