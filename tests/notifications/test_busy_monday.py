"""A sweep of 200 trials starts on a real worker while one team's webhook hangs, one answers 500, one 429 with
Retry-After and the mail server is slow: the others still hear at once, each person in a few e-mails, not 200."""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import JobEvent
from notifications.models import Delivery, Subscription, TeamWebhook
from notifications.tasks import notify
from tests.conftest import make_team, make_user
from tests.notifications.conftest import WebhookReceiver
from tests.workers import celery_worker

SUBJECT = re.compile(r"^Subject: \[Gangway\] (?:(\d+) jobs of team [\w-]+ started|.+ \(#\d+\) started)\r?$", re.M)


@pytest.fixture
def eager_tasks():
    """Overrides the folder's eager tasks: here the broker and the worker are the point."""


@pytest.fixture
def receivers():
    made = {name: WebhookReceiver() for name in ("hangs", "fails", "busy", "well", "also-well")}
    made["hangs"].answer(*[60.0] * 50)  # takes the post, answers a minute later
    made["fails"].answer(*[500] * 50)
    made["busy"].answer(*[(429, 120)] * 50)
    yield made
    for receiver in made.values():
        receiver.stop()


def carried(text: str) -> int:
    """How many events a post told: a digest's headline count, else 1."""
    first = text.split(" ", 1)[0]
    return int(first) if first.isdigit() else 1


def wait_for(condition, seconds: float) -> float:
    start = time.monotonic()
    while not condition() and time.monotonic() - start < seconds:
        time.sleep(0.25)
    return time.monotonic() - start


@pytest.mark.worker
def test_a_sweep_of_200_starts_reaches_everyone_who_can_be_reached_in_a_few_messages(
        transactional_db, tiers, submit, smtp, receivers):  # fmt: skip
    smtp.confirm_after = 0.2  # a slow mail server
    teams = {name: make_team(name, tiers, gpu=8) for name in receivers}
    for name, team in teams.items():
        TeamWebhook.objects.create(team=team, url=receivers[name].url, on_start=True)
    people = []
    for name, team in teams.items():
        for i in range(4):
            person = make_user(f"{name}-{i}", teams=[team])
            person.email = f"{name}-{i}@example.com"
            person.save()
            Subscription.objects.create(user=person, team=None, on_start=True)
            people.append(person)
    events = [
        JobEvent.objects.create(job=submit(team=person.memberships.get().team, user=person, name=f"trial-{n:03d}"),
                                kind=JobEvent.Kind.RUNNING, message="Running on node-01.")
        for n, person in enumerate(people * 10)
    ]  # fmt: skip
    assert len(events) == 200

    env = {"EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend", "EMAIL_HOST": "127.0.0.1",
           "EMAIL_PORT": str(smtp.port), "WEBHOOK_ALLOW_HTTP": "1", "WEBHOOK_ALLOW_PRIVATE": "1",
           "NOTIFY_BATCH_SECONDS": "2"}  # fmt: skip
    with celery_worker(queues=("notifications",), **env) as worker:
        asked_at = timezone.now()
        for event in events:
            notify.delay(event.pk)

        def told(receiver) -> int:
            return sum(carried(post["text"]) for post in receiver.posts)

        def mailed() -> int:
            return sum(int(count or 1) for _, message in smtp.messages for count in SUBJECT.findall(message))

        waited = wait_for(lambda: told(receivers["well"]) == 40 and told(receivers["also-well"]) == 40
                          and mailed() == 200, 40)  # fmt: skip
        said = worker.stdout.read() if worker.poll() is not None else ""
        assert waited < 40, (f"told {told(receivers['well'])}, {told(receivers['also-well'])} of 40 and mailed "
                             f"{mailed()} of 200; the worker said: {said}")  # fmt: skip
        wait_for(lambda: not Delivery.objects.filter(state__in=("pending", "sending")).exists(), 20)

    # Each person hears of their 10 trials in a few e-mails, each trial once.
    per_person = Counter(recipients[0] for recipients, _ in smtp.messages)
    assert set(per_person) == {person.email for person in people} and max(per_person.values()) <= 3
    assert set(Delivery.objects.filter(channel="email").values_list("state", "attempts")) == {("sent", 1)}
    # The webhooks that answer get every start, in a few posts.
    assert all(len(receivers[name].posts) <= 3 for name in ("well", "also-well"))
    # The one that hangs is posted to a few times, each recorded as sent with its answer unknown.
    hung = Delivery.objects.filter(target=receivers["hangs"].url)
    assert len(receivers["hangs"].posts) <= 3 and set(hung.values_list("state", "attempts")) == {("sent", 1)}
    assert all(error.startswith("The webhook took longer than 5 s") for error in hung.values_list("error", flat=True))
    # The one that fails waits for its retry, saying why; the busy one no sooner than it asked.
    failing = Delivery.objects.filter(target=receivers["fails"].url)
    assert set(failing.values_list("state", "error")) == {
        ("retrying", "The webhook answered 500 Internal Server Error.")}
    busy = Delivery.objects.filter(target=receivers["busy"].url)
    assert set(busy.values_list("state", flat=True)) == {"retrying"}
    assert min(busy.values_list("retry_at", flat=True)) >= asked_at + timedelta(seconds=120)
