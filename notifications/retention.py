"""How long the record of a notification is kept: a delivery sent or failed goes once DELIVERY_RETENTION has
passed, and so does a notice that an API token expires once its token no longer authenticates. The job's
events, the trail people read, are never deleted here."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet

from notifications.models import Delivery, TokenNotice

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
        went, sent = _delete_oldest(Delivery.objects.filter(old, channel=channel), PRUNE_BATCHES - statements)
        deleted, statements = deleted + went, statements + sent
    return deleted


def token_notices_prune(*, now: datetime) -> int:
    """Deletes the notices that an API token expires made more than DELIVERY_RETENTION before `now` whose token no
    longer authenticates (revoked, or expired by `now`), oldest first, at most PRUNE_BATCH a statement and
    PRUNE_BATCHES statements; returns how many went (0 when the setting is 0: every notice is kept).

    A notice of a token that still authenticates is kept however old, sent or not: `token_notices.notices_due`
    makes one for such a token whenever it has none of its kind, so deleting it would tell its people again.
    Once the token no longer authenticates nothing is made or sent for it. A deleted token's notices go with it.
    """
    keep = settings.DELIVERY_RETENTION
    if not keep:
        return 0
    old = Q(created_at__lt=now - timedelta(seconds=keep)) & (
        Q(token__revoked_at__isnull=False) | Q(token__expires_at__lte=now))  # fmt: skip
    return _delete_oldest(TokenNotice.objects.filter(old), PRUNE_BATCHES)[0]


def _delete_oldest(rows: QuerySet, statements: int) -> tuple[int, int]:
    """Deletes `rows`, oldest first, PRUNE_BATCH at a time in at most `statements` statements; returns how many
    rows went and how many statements it took."""
    deleted, made = 0, 0
    while made < statements:
        batch = list(rows.order_by("created_at", "id").values_list("pk", flat=True)[:PRUNE_BATCH])
        if not batch:
            break
        # Deleted by key (each row found through the primary key), the filter repeated: a row read as
        # prunable is deleted only if it still is.
        deleted += rows.filter(pk__in=batch).delete()[0]
        made += 1
        if len(batch) < PRUNE_BATCH:
            break
    return deleted, made
