"""Single flight across every worker: a PostgreSQL advisory lock held until commit, or a lease row."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from scheduling.models import Lease


# How much longer than the task's hard time limit a transaction holding a lock may sit quiet before
# PostgreSQL ends its session: no live worker is quiet that long (the limit kills it first).
LOST_SESSION_MARGIN = 60  # seconds


def try_transaction_lock(name: str) -> bool:
    """Take the lock `name` for the current transaction; False when another holds it.

    PostgreSQL releases an xact advisory lock at commit or rollback, so a worker
    killed mid-cycle can never leave it held. A worker that goes quiet instead (its
    node cut off, its process frozen) ends nothing: its session would hold the lock
    until TCP keepalive gives up, two hours by default, every cycle meanwhile skipped.
    So the transaction also gets an idle timeout (SET LOCAL: it ends with the
    transaction, and is safe behind a pooler in transaction mode) a margin above the
    task's hard time limit. SQLite (the demo) runs every transaction IMMEDIATE, which
    already lets one writer in at a time.
    """
    if connection.vendor != "postgresql":
        return True
    key = zlib.crc32(name.encode())
    quiet = f"{int((settings.CELERY_TASK_TIME_LIMIT + LOST_SESSION_MARGIN) * 1000)}ms"
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, true), "
                       "pg_try_advisory_xact_lock(%s)", [quiet, key])  # fmt: skip
        return bool(cursor.fetchone()[1])


@contextmanager
def lease(name: str, *, seconds: float) -> Iterator[bool]:
    """Holds the lease `name` for the block; yields False (holding nothing) while another holds it.

    For work that commits as it goes, such as reconcile: each of its corrections commits on its
    own, so no row stays locked while a slow cluster call runs, and a lock held for a
    transaction cannot span them. The lease is a row claimed by a conditional UPDATE, so it
    needs no session state (safe behind a pooler in transaction mode); it ends with the block,
    or lapses `seconds` after it was taken if its holder died. `seconds` must outlast the work:
    the task's time limit and a margin.
    """
    holder = uuid.uuid4().hex
    now = timezone.now()
    Lease.objects.get_or_create(name=name, defaults={"until": now})
    held = Lease.objects.filter(name=name, until__lte=now).update(holder=holder, until=now + timedelta(seconds=seconds))
    try:
        yield bool(held)
    finally:
        if held:
            Lease.objects.filter(name=name, holder=holder).update(holder="", until=timezone.now())
