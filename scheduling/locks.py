"""Single-flight across every worker: a PostgreSQL advisory lock held until commit."""

from __future__ import annotations

import zlib

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
