"""Single-flight across every worker: PostgreSQL advisory locks, held until commit or for a block."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


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
def session_lock(name: str) -> Iterator[bool]:
    """Holds the lock `name` for the block, across the block's transactions; yields False
    (and holds nothing) when another holds it.

    For work that commits as it goes, such as reconcile: each of its corrections commits on
    its own, so no row stays locked while a slow cluster call runs. The lock is released at
    the block's end, or by PostgreSQL when a killed worker's connection closes. SQLite (the
    demo) has no such lock; its one worker runs one task at a time.
    """
    if connection.vendor != "postgresql":
        yield True
        return
    key = zlib.crc32(name.encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
