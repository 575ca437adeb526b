"""How long the record of a notification is kept: a delivery sent or failed goes once DELIVERY_RETENTION has
passed. The job's events, the trail people read, are never deleted here."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from notifications.models import Delivery

# States a delivery ends in: sent, or failed (a delivery dropped as no longer wanted is failed, saying why).
ENDED = (Delivery.State.SENT, Delivery.State.FAILED)
# Rows one DELETE removes at most, and DELETEs one run sends at most: each statement holds its rows for a
# moment, and a backlog (the first run after an upgrade, or DELIVERY_RETENTION lowered) drains over a few runs.
PRUNE_BATCH = 1000
PRUNE_BATCHES = 20


def deliveries_prune(*, now: datetime) -> int:
    """Deletes the deliveries sent or failed that were made more than DELIVERY_RETENTION before `now`, oldest
    first, at most PRUNE_BATCH a statement and PRUNE_BATCHES statements; returns how many went (0 when the
    setting is 0: every delivery is kept).

    A delivery pending, being sent or waiting for a retry is never deleted, however old. Each channel is
    read on its own, from the oldest end of the index `delivery_by_channel`.
    """
    keep = settings.DELIVERY_RETENTION
    if not keep:
        return 0
    old = Q(state__in=ENDED, created_at__lt=now - timedelta(seconds=keep))
    deleted, statements = 0, 0
    for channel in Delivery.Channel.values:
        while statements < PRUNE_BATCHES:
            oldest = Delivery.objects.filter(old, channel=channel).order_by("created_at", "id")
            batch = list(oldest.values_list("pk", flat=True)[:PRUNE_BATCH])
            if not batch:
                break
            # Deleted by key (each row found through the primary key), the filter repeated: a row read
            # as ended is deleted only if it still is.
            deleted += Delivery.objects.filter(old, pk__in=batch).delete()[0]
            statements += 1
            if len(batch) < PRUNE_BATCH:
                break
    return deleted
