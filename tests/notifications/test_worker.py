"""A real Celery worker sends what a committed transition enqueued: the e-mail reaches the local SMTP sink."""

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
from jobs.transitions import transition
from notifications.models import Delivery, Subscription

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def eager_tasks():
    """Overrides the folder's eager tasks: here the broker and the worker are the point."""


@pytest.fixture
def worker(transactional_db, smtp):
    broker = settings.CELERY_BROKER_URL
    redis.Redis.from_url(broker).flushdb()
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.test_settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
        "PUBLIC_URL": "https://gangway.example.com",
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
def test_a_worker_emails_the_owner_when_their_job_fails(worker, smtp, submit, owner):
    owner.email = "owner@example.com"
    owner.save()
    Subscription.objects.create(user=owner, team=None, on_fail=True)
    job = submit()
    for to in (Job.State.ADMITTED, Job.State.RUNNING):
        transition(job, to, message=f"{to}.")
    transition(job, Job.State.FAILED, message="Failed: Replica worker-0 exited with code 137 (OOMKilled).")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not smtp.messages:
        time.sleep(0.2)
    assert smtp.messages, "no e-mail; worker said: " + (worker.stdout.read() if worker.poll() is not None else "")
    ((recipients, message),) = smtp.messages
    assert recipients == ["owner@example.com"] and "failed: Failed: Replica worker-0 exited with code 137" in message
    for _ in range(50):
        if Delivery.objects.filter(state="sent").exists():
            break
        time.sleep(0.1)
    assert Delivery.objects.get().state == "sent"
