"""Single flight across every worker: a PostgreSQL advisory lock held until commit, or a lease row."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from scheduling.models import Lease


def try_transaction_lock(name: str) -> bool:
    """Take the lock `name` for the current transaction; False when another holds it.

    PostgreSQL releases an xact advisory lock at commit or rollback, so a worker
    killed mid-cycle can never leave it held. SQLite (the demo) runs every
    transaction IMMEDIATE, which already lets one writer in at a time.
    """
    if connection.vendor != "postgresql":
        return True
    key = zlib.crc32(name.encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
        return bool(cursor.fetchone()[0])


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
