"""The hook on every job transition: enqueue a notification task once the transition commits."""

from __future__ import annotations

import logging

from django.db import transaction
from kombu.exceptions import OperationalError

from notifications.models import MOMENTS
from notifications.tasks import notify

log = logging.getLogger("gangway.notifications")


def enqueue_on_commit(sender, *, job, event, **kwargs) -> None:
    """Asks for the event's notifications after the transition commits; a rolled-back one sends nothing.

    The admission cycle and reconcile move jobs: enqueueing costs them one broker publish per
    notable event, never a lookup or a send, and a broker that is down costs them nothing but
    a warning (the notifications of that moment are lost, the cycle is not).
    """
    if event.kind not in MOMENTS:
        return
    transaction.on_commit(lambda: _enqueue(event.pk))


def _enqueue(event_id: int) -> None:
    try:
        notify.apply_async((event_id,), retry=False)
    except OperationalError as error:
        log.warning("could not enqueue the notifications of event %s: %s", event_id, error)
