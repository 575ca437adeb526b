"""A real Celery worker sends what a committed transition enqueued: the e-mail reaches the local SMTP sink."""

from __future__ import annotations

import time

import pytest

from jobs.models import Job
from jobs.transitions import transition
from notifications.models import Delivery, Subscription
from tests.workers import celery_worker


@pytest.fixture
def eager_tasks():
    """Overrides the folder's eager tasks: here the broker and the worker are the point."""


@pytest.fixture
def worker(transactional_db, smtp):
    with celery_worker(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend", EMAIL_HOST="127.0.0.1",
                       EMAIL_PORT=str(smtp.port), PUBLIC_URL="https://gangway.example.com") as process:
        yield process


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
