"""Deliveries to one receiver that wait at the same time go out as one message, a digest: a burst of
40 starts is a few webhook posts and a few e-mails, not 40 of each; every delivery keeps its own record,
and nothing is sent twice."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.utils import timezone

from jobs.models import Job, JobEvent
from jobs.transitions import transition
from notifications import audience, batching, claims, outcomes, sending, tasks
from notifications.models import Delivery, Subscription, TeamWebhook

pytestmark = pytest.mark.django_db

LINK = re.compile(r"<https://gangway\.example\.com/jobs/\d+/\|Open the job>")


@pytest.fixture
def held(monkeypatch):
    """Sends held back for a burst to gather: a `deliver` enqueued with a countdown waits here, as a
    worker holds it until its ETA, till the test lets the time pass (`held.run()`); others run at once."""

    class Held(list):
        def run(self):
            while self:
                args, kwargs = self.pop(0)
                apply_async(args, kwargs)

    waiting = Held()
    apply_async = tasks.deliver.apply_async

    def hold(args=None, kwargs=None, countdown=None, **options):
        if countdown:
            waiting.append((args, kwargs))
            return None
        return apply_async(args, kwargs, **options)

    monkeypatch.setattr(tasks.deliver, "apply_async", hold)
    return waiting


def start(jobs, capture) -> None:
    """Starts the jobs as one admission cycle would: their notifications are enqueued as it commits."""
    with capture(execute=True):
        for job in jobs:
            transition(job, Job.State.ADMITTED, message="Admitted.")
            transition(job, Job.State.RUNNING, message="Running on node-01.")


def trials(submit, count: int) -> list[Job]:
    return [submit(name=f"trial-{i:02d}") for i in range(count)]


def events(jobs, kind=JobEvent.Kind.RUNNING, message="Running on node-01.") -> list[JobEvent]:
    return [JobEvent.objects.create(job=job, kind=kind, message=message) for job in jobs]


def counted(text: str) -> int:
    """How many deliveries a webhook post carried: its headline's count ("39 jobs of team maps started:"
    gives 39), or 1 for a message about one job ("Job trial-00 (#7) of team maps started: ...")."""
    first = text.split(" ", 1)[0]
    return int(first) if first.isdigit() else 1


def test_a_burst_of_40_starts_reaches_the_team_webhook_in_a_few_posts(submit, receiver, held,
                                                                      django_capture_on_commit_callbacks):  # fmt: skip
    jobs = trials(submit, 40)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)

    start(jobs, django_capture_on_commit_callbacks)
    held.run()

    assert len(receiver.posts) == 2  # the first at once, the 39 that came while it went in one digest
    lone, digest = (post["text"] for post in receiver.posts)
    assert lone == (f"Job trial-00 (#{jobs[0].pk}) of team maps started: Running on node-01. "
                    f"<https://gangway.example.com/jobs/{jobs[0].pk}/|Open the job>")  # fmt: skip
    lines = digest.split("\n")
    assert lines[0] == "39 jobs of team maps started:"
    assert lines[1] == (f"• Job trial-01 (#{jobs[1].pk}) of team maps started: Running on node-01. "
                        f"<https://gangway.example.com/jobs/{jobs[1].pk}/|Open the job>")  # fmt: skip
    assert len(lines) == 1 + 20 + 1 and all(LINK.search(line) for line in lines[1:21])
    assert lines[-1] == "and 19 more: <https://gangway.example.com/teams/maps/|jobs of team maps>"
    assert set(Delivery.objects.values_list("state", "attempts")) == {("sent", 1)}
    assert sorted(Delivery.objects.values_list("digest_size", flat=True)) == [1] + [39] * 39


def test_a_burst_of_preemptions_reaches_a_subscriber_in_a_few_emails(submit, member, settings, held,
                                                                     django_capture_on_commit_callbacks):  # fmt: skip
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    member.email = "member@example.com"
    member.save()
    jobs = trials(submit, 30)
    Subscription.objects.create(user=member, team=jobs[0].team, on_preempt=True, on_fail=False)
    for job in jobs:  # running; nobody asked to hear of starts
        transition(job, Job.State.ADMITTED, message="Admitted.")
        transition(job, Job.State.RUNNING, message="Running.")

    with django_capture_on_commit_callbacks(execute=True):  # one reclaim preempts them all
        for job in jobs:
            transition(job, Job.State.PREEMPTING, message="Preempted to return GPUs to team vision.")
    held.run()

    assert len(mail.outbox) == 2
    lone, digest = mail.outbox
    assert lone.subject == f"[Gangway] trial-00 (#{jobs[0].pk}) was preempted"
    assert digest.subject == "[Gangway] 29 jobs of team maps were preempted" and digest.to == ["member@example.com"]
    paragraphs = digest.body.split("\n\n")
    assert paragraphs[0] == "29 jobs of team maps were preempted:"
    assert paragraphs[1] == (f"Job trial-01 (#{jobs[1].pk}) of team maps was preempted: Preempted to return GPUs "
                             f"to team vision.\nhttps://gangway.example.com/jobs/{jobs[1].pk}/")  # fmt: skip
    assert len(paragraphs) == 1 + 20 + 1
    assert paragraphs[-1] == "and 9 more: https://gangway.example.com/notifications/\n"
    assert set(Delivery.objects.values_list("state", "attempts")) == {("sent", 1)}


def test_a_digest_of_different_moments_counts_job_updates(submit, owner, settings, held,
                                                          django_capture_on_commit_callbacks):  # fmt: skip
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owner.email = "owner@example.com"
    owner.save()
    Subscription.objects.create(user=owner, team=None, on_start=True, on_fail=True)
    first, second, third = trials(submit, 3)
    with django_capture_on_commit_callbacks(execute=True):
        for job in (first, second, third):
            transition(job, Job.State.ADMITTED, message="Admitted.")
            transition(job, Job.State.RUNNING, message="Running.")
        transition(third, Job.State.FAILED, message="Failed: boom")
    held.run()

    assert [message.subject for message in mail.outbox] == [f"[Gangway] trial-00 (#{first.pk}) started",
                                                           "[Gangway] 3 job updates"]  # fmt: skip
    assert mail.outbox[1].body.startswith(f"3 job updates:\n\nJob trial-01 (#{second.pk}) of team maps started: ")
    assert f"Job trial-02 (#{third.pk}) of team maps failed: Failed: boom" in mail.outbox[1].body
    assert "more" not in mail.outbox[1].body


def test_a_lone_event_goes_at_once_and_reads_exactly_as_before(submit, owner, receiver, settings, held,
                                                               django_capture_on_commit_callbacks):  # fmt: skip
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owner.email = "owner@example.com"
    owner.save()
    (job,) = trials(submit, 1)
    Subscription.objects.create(user=owner, team=None, on_start=True)
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_start=True)

    start([job], django_capture_on_commit_callbacks)

    assert held == []  # nothing waited: no other delivery to either receiver was near
    assert receiver.posts == [{"text": f"Job trial-00 (#{job.pk}) of team maps started: Running on node-01. "
                                       f"<https://gangway.example.com/jobs/{job.pk}/|Open the job>",
                               "username": "Gangway"}]  # fmt: skip
    (message,) = mail.outbox
    assert message.subject == f"[Gangway] trial-00 (#{job.pk}) started"
    assert message.body == (f"Job trial-00 (#{job.pk}) of team maps started: Running on node-01.\n\n"
                            f"https://gangway.example.com/jobs/{job.pk}/\n")  # fmt: skip
    assert set(Delivery.objects.values_list("state", "attempts", "digest_size")) == {("sent", 1, 1)}


def test_a_retried_digest_drops_a_delivery_no_longer_wanted_and_sends_the_others(submit, member, maps, vision,
                                                                                 settings, monkeypatch):  # fmt: skip
    """The mail server fails once; meanwhile the member leaves team vision: its job's news is dropped, maps' goes."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    member.email = "member@example.com"
    member.save()
    member.memberships.create(team=vision)
    for team in (maps, vision):
        Subscription.objects.create(user=member, team=team, on_fail=True)
    maps_jobs = trials(submit, 3)
    vision_job = submit(name="detector", team=vision, user=member)
    deliveries = [d for event in events([*maps_jobs, vision_job], JobEvent.Kind.FAILED, "Failed: boom")
                  for d in audience.deliveries_for(event)]  # fmt: skip
    sent = sending.send

    def down_then_left(digest, attempt):
        monkeypatch.setattr(sending, "send", sent)
        member.memberships.filter(team=vision).delete()
        raise outcomes.SendFailed("Could not send the e-mail: connection refused", retry=True)

    monkeypatch.setattr(sending, "send", down_then_left)
    tasks.deliver.delay(deliveries[0].pk)

    (message,) = mail.outbox
    assert message.subject == "[Gangway] 3 jobs of team maps failed"
    assert "detector" not in message.body
    dropped = Delivery.objects.get(job=vision_job)
    assert (dropped.state, dropped.attempts) == ("failed", 2)
    assert dropped.error == "Not sent: member is no longer in team vision."
    assert set(Delivery.objects.filter(job__in=maps_jobs).values_list("state", "attempts", "digest_size")) == {
        ("sent", 2, 3)}


def test_a_429_on_a_digest_retries_all_of_it_no_sooner_than_it_asks(submit, receiver, monkeypatch):
    jobs = trials(submit, 10)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)
    deliveries = [d for event in events(jobs) for d in audience.deliveries_for(event)]
    receiver.answer((429, 120))
    seen = []
    retry = tasks.deliver.retry

    def noting(*args, countdown=None, **kwargs):
        seen.append((countdown, list(Delivery.objects.values_list("state", "retry_at"))))
        return retry(*args, countdown=countdown, **kwargs)

    monkeypatch.setattr(tasks.deliver, "retry", noting)
    asked = timezone.now()
    tasks.deliver.delay(deliveries[0].pk)

    ((countdown, records),) = seen
    assert countdown >= 120
    assert {state for state, _ in records} == {"retrying"}
    (retry_at,) = {retry_at for _, retry_at in records}  # the same for every delivery of the digest
    assert retry_at >= asked + timedelta(seconds=120)
    assert len(receiver.posts) == 2 and receiver.posts[0] == receiver.posts[1]  # the same digest, once more
    assert receiver.posts[1]["text"].startswith("10 jobs of team maps started:")
    assert set(Delivery.objects.values_list("state", "attempts", "digest_size")) == {("sent", 2, 10)}


def test_a_lost_digest_is_sent_again_as_one_message(submit, receiver):
    """Its worker died while sending it: beat's resend_lost finds each of its deliveries; one task sends them all."""
    jobs = trials(submit, 5)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)
    for event in events(jobs):
        audience.deliveries_for(event)
    Delivery.objects.update(state="sending", attempts=1, claimed_at=timezone.now() - claims.STALE_CLAIM * 2)

    assert tasks.resend_lost() == 5

    (post,) = receiver.posts
    assert post["text"].startswith("5 jobs of team maps started:")
    assert set(Delivery.objects.values_list("state", "attempts", "digest_size")) == {("sent", 2, 5)}


def test_with_no_batch_window_nothing_waits_yet_what_already_waits_goes_together(
        submit, receiver, settings, held, django_capture_on_commit_callbacks):  # fmt: skip
    settings.NOTIFY_BATCH_SECONDS = 0
    jobs = trials(submit, 6)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)
    start(jobs[:3], django_capture_on_commit_callbacks)
    assert held == [] and len(receiver.posts) == 3  # each sent as it came: nothing was waiting beside it

    # Three made while the notifier was busy: the first task to run takes all three, the others find nothing.
    waiting = [d for event in events(jobs[3:]) for d in audience.deliveries_for(event)]
    for delivery in waiting:
        tasks.deliver.delay(delivery.pk)
    assert len(receiver.posts) == 4 and receiver.posts[3]["text"].startswith("3 jobs of team maps started:")


@pytest.mark.parametrize("window", [-1, "10", True])
def test_a_batch_window_that_is_not_seconds_is_refused_naming_the_setting(settings, window):
    settings.NOTIFY_BATCH_SECONDS = window
    with pytest.raises(ImproperlyConfigured, match="^NOTIFY_BATCH_SECONDS must be a number of seconds, 0 or more"):
        batching.batch_seconds()


@pytest.mark.django_db(transaction=True)
def test_two_workers_gathering_the_same_burst_at_once_send_each_delivery_once(submit, receiver, monkeypatch):
    """Both have listed the same 38 waiting deliveries before either claims one (real PostgreSQL, two connections)."""
    jobs = trials(submit, 40)
    TeamWebhook.objects.create(team=jobs[0].team, url=receiver.url, on_start=True)
    first, second, *_ = [d for event in events(jobs) for d in audience.deliveries_for(event)]
    listed = threading.Barrier(2, timeout=10)
    waiting_for = claims._waiting_for

    def listing_together(*args):
        found = waiting_for(*args)
        listed.wait()
        return found

    monkeypatch.setattr(claims, "_waiting_for", listing_together)
    outcomes = []

    def worker(delivery_id):
        try:
            outcomes.append(tasks.deliver.apply((delivery_id, 0)).get())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(d.pk,)) for d in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert outcomes == ["sent", "sent"] and len(receiver.posts) == 2
    sizes = [counted(post["text"]) for post in receiver.posts]
    assert sum(sizes) == 40  # a delivery in both digests would be counted twice
    assert set(Delivery.objects.values_list("state", "attempts")) == {("sent", 1)}
    assert sorted(Delivery.objects.values_list("digest_size", flat=True)) == sorted(s for s in sizes for _ in range(s))
