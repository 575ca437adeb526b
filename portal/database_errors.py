"""Whether a database error is the database out of service for a while, rather than the code's mistake.

A PostgreSQL failover refuses writes (a standby is read-only until promoted), then ends every connection,
and a server starting up or full of connections refuses new ones: a request retried seconds later is
answered. The API answers these 503 with Retry-After (`portal.api_errors`), which the CLI retries with the
same idempotency key; a token's last use is not written meanwhile (`tenants.tokens`). Everything else (an
unknown column, a constraint, a transaction left aborted by an earlier error) is the code's and stays a
500. PostgreSQL's errors are read by their SQLSTATE; other databases' are never taken for an outage.
"""

from __future__ import annotations

from django.db import DatabaseError, OperationalError

READ_ONLY = "25006"  # read_only_sql_transaction: a standby, or a primary being demoted
# Classes and codes of an outage: 08 connection exception, 53 insufficient resources (too many connections),
# 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, in recovery).
UNREACHABLE_CLASSES = ("08", "53")
UNREACHABLE_CODES = ("57P01", "57P02", "57P03")


def unavailable_problem(error: BaseException) -> str:
    """What is wrong, for a person, when `error` is the database out of service for a while ("The database
    cannot be reached for the moment"); "" when it is not."""
    if not isinstance(error, DatabaseError):
        return ""
    cause = error.__cause__  # what Django's wrapper raised from: the driver's own error
    if not hasattr(cause, "sqlstate"):  # not psycopg: SQLite's OperationalError is also a missing table
        return ""
    state = cause.sqlstate
    if state == READ_ONLY:
        return "The database is taking no writes for the moment (a failover)"
    lost = state is None and isinstance(error, OperationalError)  # no connection made, or one dropped
    if lost or (state and (state[:2] in UNREACHABLE_CLASSES or state in UNREACHABLE_CODES)):
        return "The database cannot be reached for the moment"
    return ""
