"""Celery tasks that send notifications: one finds who hears about an event, one sends each message."""

from __future__ import annotations

import logging
import random

from celery import shared_task
from django.utils import timezone

from jobs.models import JobEvent
from notifications import services
from notifications.models import Delivery, PendingEvent

log = logging.getLogger("gangway.notifications")
MAX_RETRIES = 5


@shared_task(name="notifications.notify", ignore_result=True)
def notify(event_id: int) -> int:
    """Makes the event's deliveries and enqueues each one still to send; returns how many were enqueued.

    Returns 0 when the event is gone. A second run finds the same deliveries and enqueues
    only those still waiting, so nobody is told twice.
    """
    event = JobEvent.objects.select_related("job__team").filter(pk=event_id).first()
    if event is None:
        return 0
    waiting = [d for d in services.deliveries_for(event) if d.state == Delivery.State.PENDING]
    for delivery in waiting:
        deliver.delay(delivery.pk)
    PendingEvent.objects.filter(event_id=event_id).delete()  # worked out: resend_lost leaves it be
    return len(waiting)


@shared_task(bind=True, name="notifications.deliver", ignore_result=True, max_retries=MAX_RETRIES)
def deliver(self, delivery_id: int) -> str:
    """Sends one delivery, retried with backoff (30 s, 1, 2, 4, 8 min, a fifth more or less so that a
    burst's retries spread out, and never before a 429's Retry-After) while the failure may pass.

    Returns its state; nothing happens to a delivery already sent, failed or being sent. A retry first
    checks the message is still wanted (`services.why_not_wanted`); an error nobody foresaw is
    recorded and retried like any other, so a delivery never stays "sending". Tries are counted by
    the delivery's claims, not the task's retries: a delivery `resend_lost` enqueues anew is a retry too.
    """
    delivery = services.claim(delivery_id)
    if delivery is None:
        return "skipped"
    tried = delivery.attempts - 1  # before this claim
    if tried and (unwanted := services.why_not_wanted(delivery)):
        services.record(delivery, error=services.SendFailed(unwanted, retry=False), final=True)
        return Delivery.State.FAILED
    try:
        services.send(delivery)
    except services.AnswerUnknown as unknown:
        services.record(delivery, error=unknown)
        return Delivery.State.SENT
    except Exception as error:  # noqa: BLE001 - recorded and retried: never left "sending"
        if not isinstance(error, services.SendFailed):
            error = services.SendFailed(f"Sending failed unexpectedly ({type(error).__name__}: {error}).", retry=True)
        final = not error.retry or tried >= MAX_RETRIES
        wait = max(30 * 2**tried * random.uniform(0.8, 1.2), error.after or 0)
        services.record(delivery, error=error, final=final, retry_in=wait)
        log.warning("notification %s to %s: %s", delivery.pk, delivery.channel, error)
        if final:
            return Delivery.State.FAILED
        # Should the broker refuse the retry, Celery drops the task; `resend_lost` sends it once overdue.
        raise self.retry(countdown=wait) from None
    services.record(delivery)
    return Delivery.State.SENT


@shared_task(name="notifications.resend_lost", ignore_result=True)
def resend_lost() -> int:
    """Sends again what no task will run: the deliveries of `services.lost` (their worker died while
    sending them, or their first send or retry never reached the broker) and the events whose
    `notify` never ran to its end (`PendingEvent`s older than STALE_CLAIM: the broker refused the
    task, or its worker died); returns how many tasks were enqueued. Nothing made more than STALE_NEWS
    ago is sent. Beat runs it every few minutes."""
    now = timezone.now()
    lost = list(Delivery.objects.filter(services.lost(now)).values_list("pk", flat=True))
    for delivery_id in lost:
        deliver.delay(delivery_id)
    pending = PendingEvent.objects.filter(created_at__lt=now - services.STALE_CLAIM)
    if old := pending.filter(created_at__lt=now - services.STALE_NEWS).delete()[0]:
        log.warning("dropped the notifications of %d events older than %s: old news", old, services.STALE_NEWS)
    events = list(pending.values_list("event_id", flat=True))
    for event_id in events:
        notify.delay(event_id)
    return len(lost) + len(events)
