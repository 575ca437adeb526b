"""When a new delivery is first sent: with its receiver's pending retry, once a burst to its receiver has
gathered (NOTIFY_BATCH_SECONDS), or at once; a receiver then gets one digest, not a message per event."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from notifications.claims import STALE_NEWS, to_receiver
from notifications.models import Delivery


def held_for_retry(delivery: Delivery) -> float:
    """Seconds until its receiver's next retry, when a delivery to it (the same channel and target) is
    waiting for one; 0 when none is. A receiver that refused (500, a mail server down) or asked to be
    left alone (429's Retry-After) is not sent news made meanwhile sooner: the new delivery waits, and the
    retry's message carries it (`claims.gather` takes every pending delivery), so a receiver that fails for
    good gets one message at each step of one backoff, not six for every event. The wait is written in the
    delivery's retry_at, so that `resend_lost` takes it as due then, not as lost."""
    now = timezone.now()
    retrying = to_receiver(delivery).filter(state=Delivery.State.RETRYING, retry_at__gt=now,
                                           created_at__gte=now - STALE_NEWS)  # fmt: skip
    due = retrying.order_by("retry_at").values_list("retry_at", flat=True).first()
    if due is None:
        return 0.0
    Delivery.objects.filter(pk=delivery.pk, state=Delivery.State.PENDING).update(retry_at=due)
    delivery.retry_at = due
    return (due - now).total_seconds()


def gathering_wait(delivery: Delivery) -> float:
    """Seconds the first send of `delivery` waits so that a burst to its receiver goes out as one digest:
    NOTIFY_BATCH_SECONDS when another delivery to the same receiver was made within that time, else 0
    (a lone message goes at once, as does everything when the setting is 0)."""
    window = batch_seconds()
    if not window:
        return 0.0
    near = to_receiver(delivery).filter(created_at__gte=delivery.created_at - timedelta(seconds=window))
    return window if near.exclude(pk=delivery.pk).exists() else 0.0


def batch_seconds() -> float:
    """NOTIFY_BATCH_SECONDS: how long a burst of deliveries to one receiver gathers before its digest goes out."""
    window = getattr(settings, "NOTIFY_BATCH_SECONDS", 10)
    if isinstance(window, bool) or not isinstance(window, int | float) or window < 0:
        raise ImproperlyConfigured(f"NOTIFY_BATCH_SECONDS must be a number of seconds, 0 or more (0: digests "
                                   f"never wait), not {window!r}.")  # fmt: skip
    return float(window)
