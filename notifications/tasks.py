"""Celery tasks that send notifications: one finds who hears about an event, one sends each message."""

from __future__ import annotations

import logging

from celery import shared_task

from jobs.models import JobEvent
from notifications import services
from notifications.models import Delivery

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
    return len(waiting)


@shared_task(bind=True, name="notifications.deliver", ignore_result=True, max_retries=MAX_RETRIES)
def deliver(self, delivery_id: int) -> str:
    """Sends one delivery, retried with backoff (30 s, 1, 2, 4, 8 min) while the failure may pass.

    Returns its state; nothing happens to a delivery already sent, failed or being sent.
    """
    delivery = services.claim(delivery_id)
    if delivery is None:
        return "skipped"
    try:
        services.send(delivery)
    except services.SendFailed as error:
        final = not error.retry or self.request.retries >= MAX_RETRIES
        services.record(delivery, error=error, final=final)
        log.warning("notification %s to %s: %s", delivery.pk, delivery.channel, error)
        if final:
            return Delivery.State.FAILED
        raise self.retry(countdown=30 * 2**self.request.retries) from None
    services.record(delivery)
    return Delivery.State.SENT
