"""Notifications whose next step never reached the broker (it was down for a moment, or Redis lost its queue):
beat's `resend_lost` works out the events again and sends the deliveries again, still only to who may hear of
the job, and never twice."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from celery.exceptions import Reject
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from jobs.models import Job, JobEvent
from jobs.transitions import transition
from notifications import audience, tasks
from notifications.models import Delivery, PendingEvent, Subscription, TeamWebhook
from portal import triggers

pytestmark = pytest.mark.django_db


@pytest.fixture
def later(monkeypatch):
    """Runs `resend_lost` as beat would `minutes` from now."""
    now = timezone.now

    def _later(minutes: float) -> int:
        with mock.patch.object(timezone, "now", lambda: now() + timedelta(minutes=minutes)):
            return tasks.resend_lost()

    return _later


def failed_event(job) -> JobEvent:
    return JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom")


def test_a_retry_the_broker_never_took_is_sent_again_once_overdue(submit, receiver, later):
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    (delivery,) = audience.deliveries_for(failed_event(job))
    receiver.answer(503)
    # The worker runs it (not eagerly), the receiver answers 503, and the retry cannot be published:
    # Celery rejects the message, so nothing will ever run it again.
    tasks.deliver.push_request(id="lost-retry", called_directly=False, is_eager=False, retries=0)
    try:
        with mock.patch.object(tasks.deliver, "apply_async", side_effect=OperationalError("Connection refused")):
            with pytest.raises(Reject):
                tasks.deliver.run(delivery.pk)
    finally:
        tasks.deliver.pop_request()
    delivery.refresh_from_db()
    assert delivery.state == "retrying"

    assert later(0) == 0  # not due yet: its retry may be waiting in the broker
    assert later(60) == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, len(receiver.posts)) == ("sent", 2, 2)


def test_deliveries_made_but_never_enqueued_are_sent(submit, receiver, later):
    """notify made the deliveries, then its worker was killed (or the broker refused) before enqueueing them."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    (delivery,) = audience.deliveries_for(failed_event(job))

    assert later(1) == 0  # just made: notify may be enqueueing it now
    assert later(60) == 1
    delivery.refresh_from_db()
    assert (delivery.state, len(receiver.posts)) == ("sent", 1)
    assert later(120) == 0


def test_a_delivery_sent_again_is_not_sent_to_someone_who_left_the_team(submit, member, smtp, later):
    member.email = "member@example.com"
    member.save()
    job = submit()
    Subscription.objects.create(user=member, team=job.team, on_fail=True)
    (delivery,) = audience.deliveries_for(failed_event(job))
    # Claimed, then its worker was killed mid-send; meanwhile the member leaves the team.
    Delivery.objects.filter(pk=delivery.pk).update(state="sending", attempts=1, claimed_at=timezone.now())
    member.memberships.all().delete()

    assert later(60) == 1
    delivery.refresh_from_db()
    assert smtp.messages == []
    assert (delivery.state, delivery.error) == ("failed", "Not sent: member is no longer in team maps.")


def test_an_event_whose_notify_never_reached_the_broker_is_notified_once_it_is_back(submit, receiver, later, monkeypatch,
                                                                                     django_capture_on_commit_callbacks):  # fmt: skip
    """The broker was down when the job failed: no delivery was made, yet nobody's notification is lost."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    monkeypatch.setattr(tasks.notify, "apply_async", mock.Mock(side_effect=OperationalError("Connection refused")))
    with django_capture_on_commit_callbacks(execute=True):
        for state in (Job.State.ADMITTED, Job.State.RUNNING, Job.State.FAILED):
            transition(job, state, message=f"{state}.")
    assert not Delivery.objects.exists() and PendingEvent.objects.count() == 2  # started, failed
    monkeypatch.undo()
    triggers._broker_down_until = 0.0

    assert later(1) == 0  # just written: its notify may be on its way
    assert later(60) == 2
    assert not PendingEvent.objects.exists()
    assert len(receiver.posts) == 1 and Delivery.objects.get().state == "sent"  # the webhook asked for failures
    assert later(120) == 0


def test_a_rolled_back_transition_leaves_nothing_pending(submit, django_capture_on_commit_callbacks):
    job = submit()
    with pytest.raises(RuntimeError), transaction.atomic():
        transition(job, Job.State.ADMITTED, message="Admitted.")
        transition(job, Job.State.RUNNING, message="Running.")
        assert PendingEvent.objects.count() == 1
        raise RuntimeError("the cycle failed after the move")
    assert not PendingEvent.objects.exists()


def test_old_news_is_not_sent_again(submit, receiver, later, caplog):
    """A broker down for days, or rows left from long ago: a job that failed last week is old news."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    (delivery,) = audience.deliveries_for(failed_event(job))
    PendingEvent.objects.create(event=failed_event(job))

    assert later(60 * 25) == 0

    assert receiver.posts == [] and Delivery.objects.get().state == "failed"
    assert not PendingEvent.objects.exists() and "dropped the notifications of 1 events older than" in caplog.text


def test_a_retry_from_before_retries_were_timed_is_sent_again(submit, receiver, later):
    """Deliveries retrying when migration notifications/0003 came have no retry_at: their retry may be lost too."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    (delivery,) = audience.deliveries_for(failed_event(job))
    Delivery.objects.filter(pk=delivery.pk).update(state="retrying", attempts=1, retry_at=None)

    assert later(1) == 0
    assert later(60) == 1
    delivery.refresh_from_db()
    assert (delivery.state, len(receiver.posts)) == ("sent", 1)


def test_a_delivery_lost_longer_than_a_day_is_recorded_as_failed_not_sent(submit, receiver, later):
    """Old news is never sent; before, such a delivery stayed "pending" on the notifications page for good
    (and, not ended, was never pruned)."""
    job = submit()
    TeamWebhook.objects.create(team=job.team, url=receiver.url, on_fail=True)
    (stranded,) = audience.deliveries_for(failed_event(job))
    (waiting,) = audience.deliveries_for(failed_event(job))
    Delivery.objects.filter(pk=waiting.pk).update(state=Delivery.State.RETRYING,
                                                  retry_at=timezone.now() + timedelta(days=3))  # fmt: skip

    assert later(60 * 25) == 0
    stranded.refresh_from_db()
    waiting.refresh_from_db()
    assert (stranded.state, stranded.error) == ("failed", tasks.NOT_SENT_OLD_NEWS)
    assert waiting.state == "retrying"  # its retry is still to come: left to its task
    assert receiver.posts == []
