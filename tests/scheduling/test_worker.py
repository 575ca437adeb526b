"""A real Celery worker on Redis runs the loop: a submitted job reaches the end by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from jobs.models import Job
from scheduling.tasks import admission_cycle, reconcile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(transactional_db):
    """A worker process on the test database and the test Redis, stopped afterwards."""
    broker = settings.CELERY_BROKER_URL
    redis.Redis.from_url(broker).flushdb()
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.test_settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--loglevel=WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


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
