"""Deliveries whose next step never reached the broker (it was down for a moment, or Redis lost its queue) are
sent again by beat's `resend_lost`, still only to who may hear of the job, and never twice."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from celery.exceptions import Reject
from django.utils import timezone
from kombu.exceptions import OperationalError

from jobs.models import JobEvent
from notifications import services, tasks
from notifications.models import Delivery, Subscription, TeamWebhook

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
    (delivery,) = services.deliveries_for(failed_event(job))
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
    (delivery,) = services.deliveries_for(failed_event(job))

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
    (delivery,) = services.deliveries_for(failed_event(job))
    # Claimed, then its worker was killed mid-send; meanwhile the member leaves the team.
    Delivery.objects.filter(pk=delivery.pk).update(state="sending", attempts=1, claimed_at=timezone.now())
    member.memberships.all().delete()

    assert later(60) == 1
    delivery.refresh_from_db()
    assert smtp.messages == []
    assert (delivery.state, delivery.error) == ("failed", "Not sent: member is no longer in team maps.")
