"""Real workers as production runs them, one per queue: a webhook that never answers holds the
notifier, and the admission cycle beat asks for meanwhile runs at once on the loop's worker."""

from __future__ import annotations

import socket
import time

import pytest

from jobs.models import JobEvent
from notifications.models import Delivery, TeamWebhook
from notifications.tasks import notify
from scheduling.models import Cycle
from scheduling.tasks import admission_cycle
from tests.workers import celery_worker


@pytest.fixture
def eager_tasks():
    """Overrides the folder's eager tasks: here the broker and the workers are the point."""


@pytest.fixture
def dead_webhook():
    """Returns the URL of a server that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(100)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"


def wait_for(condition, seconds: float) -> float:
    """Returns how long `condition` took to hold, polling it; `seconds` or more when it never did."""
    start = time.monotonic()
    while not condition() and time.monotonic() - start < seconds:
        time.sleep(0.2)
    return time.monotonic() - start


@pytest.mark.worker
def test_an_admission_cycle_runs_while_the_notifier_waits_on_a_dead_webhook(transactional_db, submit, nodes,
                                                                           dead_webhook):  # fmt: skip
    first = submit()
    TeamWebhook.objects.create(team=first.team, url=dead_webhook, on_preempt=True)
    events = [
        JobEvent.objects.create(job=submit(name=f"victim-{i:02d}"), kind=JobEvent.Kind.PREEMPTED,
                                message="Preempted to return GPUs to team vision.")
        for i in range(8)
    ]  # fmt: skip
    webhooks = {"WEBHOOK_ALLOW_HTTP": "1", "WEBHOOK_ALLOW_PRIVATE": "1"}
    with (
        celery_worker(queues=("celery",), **webhooks) as worker,
        celery_worker(queues=("notifications",), flush=False, **webhooks) as notifier,
    ):
        for event in events:
            notify.delay(event.pk)
        busy = wait_for(lambda: Delivery.objects.exclude(state=Delivery.State.PENDING).exists(), 60)
        said = notifier.stdout.read() if notifier.poll() is not None else ""
        assert busy < 60, f"no delivery was tried; the notifier said: {said}"

        admission_cycle.delay()  # what beat sends every few seconds
        waited = wait_for(Cycle.objects.exists, 20)

        assert waited < 20, f"the cycle waited behind {Delivery.objects.exclude(state='sent').count()} deliveries"
        assert worker.poll() is None and notifier.poll() is None
