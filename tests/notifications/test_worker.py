"""A real Celery worker sends what a committed transition enqueued: the e-mail reaches the local SMTP sink; a
worker whose soft time limit stops a webhook post awaiting its answer records it sent, once."""

from __future__ import annotations

import time

import pytest

from jobs.models import Job, JobEvent
from jobs.transitions import transition
from notifications import audience
from notifications.models import Delivery, Subscription, TeamWebhook
from notifications.tasks import deliver
from tests.notifications.conftest import Trickler
from tests.notifications.test_time_limits import SENT_UNKNOWN
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


@pytest.fixture
def silent_webhook():
    """Takes the post, then never answers."""
    receiver = Trickler()
    yield receiver
    receiver.stop()


@pytest.mark.worker
def test_a_worker_whose_time_limit_comes_while_a_webhook_holds_the_post_records_it_sent_once(
        transactional_db, submit, silent_webhook):  # fmt: skip
    """A prefork worker (the pool production runs: it enforces time limits) sends it with a soft time limit of 2 s,
    shorter than the webhook's deadline (5 s): the limit stops the post while its answer is awaited."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=silent_webhook.url, on_fail=True)
    event = JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")
    (delivery,) = audience.deliveries_for(event)
    with celery_worker(queues=("notifications",), pool="prefork", WEBHOOK_ALLOW_HTTP="1",
                       WEBHOOK_ALLOW_PRIVATE="1") as worker:  # fmt: skip
        deliver.apply_async((delivery.pk, 0), soft_time_limit=2, time_limit=60)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not Delivery.objects.exclude(state__in=("pending", "sending")).exists():
            time.sleep(0.25)
        assert worker.poll() is None, worker.stdout.read()

    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 1, SENT_UNKNOWN.format("message", "the webhook"))
    assert len(silent_webhook.posts) == 1
