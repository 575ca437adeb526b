"""The hook on every job transition: enqueue a notification task once the transition commits."""

from __future__ import annotations

from django.db import transaction

from notifications.models import MOMENTS, PendingEvent
from notifications.tasks import notify
from portal.triggers import publish


def enqueue_on_commit(sender, *, job, event, **kwargs) -> None:
    """Asks for the event's notifications after the transition commits; a rolled-back one sends nothing.

    The admission cycle and reconcile move jobs: enqueueing costs them one row written with the
    event (`PendingEvent`) and one broker publish per notable event, never a lookup or a send. A
    broker that is down costs them nothing but a warning: the row stays, and beat's `resend_lost`
    enqueues the event again once the broker is back.
    """
    if event.kind not in MOMENTS:
        return
    PendingEvent.objects.create(event=event)
    transaction.on_commit(lambda: _enqueue(event.pk))


def _enqueue(event_id: int) -> None:
    publish(lambda: notify.apply_async((event_id,), retry=False), f"the notifications of event {event_id}")
