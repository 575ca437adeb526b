"""Polled fragments that answer 304 when nothing they show has changed.

A live part of a page is rendered with `data-etag` (see templates/partials/live_attrs.html);
static/js/gangway.js sends it back as If-None-Match on the next poll, and the view
answers 304 Not Modified, before rendering anything, when the fingerprint of what the
part shows is the same. base.html tells htmx not to swap a 304.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.http import HttpResponse, HttpResponseNotModified
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers

VARY = ("HX-Request", "Cookie")
# Relative times a part shows ("waiting 12 min", "about 40 min") move on with the
# clock even when no row changes: the fingerprint turns over once a minute for them.
CLOCK_STEP = 60


def minute() -> int:
    """The clock step live parts are in now: ETags of parts with relative times, and every remembered
    ETag, turn over with it."""
    return int(timezone.now().timestamp()) // CLOCK_STEP


def fingerprint(request, *parts, clock: bool = False) -> str:
    """A strong ETag (quoted) of what a part shows: `parts`, the viewer, and the minute when `clock`."""
    viewer = (request.user.pk, request.user.is_staff)
    step = minute() if clock else None
    digest = hashlib.blake2b(repr((viewer, step, parts)).encode(), digest_size=12).hexdigest()
    return f'"{digest}"'


def unchanged(request, etag: str) -> HttpResponse | None:
    """A 304 when an htmx poll already holds this version of the part; None when it must be rendered."""
    if not request.htmx:
        return None
    held = {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}
    if etag not in held:
        return None
    return live(HttpResponseNotModified(), etag)


def live(response: HttpResponse, etag: str) -> HttpResponse:
    """`response` marked as one version of a live part: ETag, Vary on HX-Request and Cookie, revalidated each time."""
    response["ETag"] = etag
    patch_vary_headers(response, VARY)
    patch_cache_control(response, private=True, no_cache=True)
    return response


# A part's ETag is read from what it shows, which costs the queries that read it. While the
# world has not moved (no cycle that changed something, no job event, no audited change, no
# sweep change: the version, scheduling.selectors.live_version), the ETag last computed for
# a part is remembered, so a poll of an unchanged part costs one small query. Kept a minute
# at most: parts that show relative times turn over with the clock.
REMEMBER_SECONDS = CLOCK_STEP

# The version is made of maxima of ids (and of a sweep's time of change), and PostgreSQL hands
# out ids in insert order, not commit order: a write that took id 100 and commits after one that
# took 101 moves no maximum. So an ETag is remembered with the write transactions of this database
# that were in flight when its part was read, the only ones that may still commit a change under
# the same version (a write that began later takes higher ids and moves the version itself). While
# every one of them is still in flight, nothing they wrote shows anywhere and the remembered ETag
# answers, at one query more (which are in flight); the first poll after one has ended reads the
# part again and remembers it with those still in flight. An ETag with none left is settled: it
# answers at the cost of the version alone, as everywhere on SQLite, whose writers take turns.
# Left to the minute: a write that drew its id (or a sweep its time) before the version was read
# and took its transaction id only after the in-flight writes were read (its first row, within
# one INSERT; a sweep's time is taken just before its UPDATE).
IN_FLIGHT = """
    SELECT array_agg(backend_xid::text) FROM pg_stat_get_activity(NULL)
    WHERE datid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()
"""


def writes_in_flight() -> frozenset[str]:
    """The transaction ids of the write transactions open in this database on other connections
    (on PostgreSQL; none elsewhere): every transaction that has written holds one until it ends.
    Read from the server's backends, not from a snapshot, whose ids in flight are those of every
    database on the server (another application's writes would only cost renders)."""
    if connection.vendor != "postgresql":
        return frozenset()
    with connection.cursor() as cursor:
        if connection.in_atomic_block:  # the server keeps what it read of its backends for a transaction
            cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(IN_FLIGHT)
        return frozenset(cursor.fetchone()[0] or ())


@dataclass(frozen=True)
class Recalled:
    """What held_at found for a part at a version: `held`, a 304 to answer at once, else None (read the
    part, then remember its ETag); `in_flight`, the write transactions to remember the ETag with."""

    scope: str
    version: object
    held: HttpResponse | None
    in_flight: frozenset[str] = frozenset()


def _version_key(request, scope: str, version) -> str:
    raw = repr((scope, request.user.pk, request.user.is_staff, version, minute())).encode()
    return "gangway:live:" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def held_at(request, scope: str, version) -> Recalled:
    """A 304 (`held`) when the poll holds the ETag remembered for `scope` at this `version` and that
    ETag still tells what the part shows; else what to remember the part's ETag with once read."""
    etag, waited_for = cache.get(_version_key(request, scope, version)) or (None, None)
    if waited_for == ():  # settled: nothing in flight could still change the part at this version
        return Recalled(scope, version, unchanged(request, etag))
    in_flight = writes_in_flight()
    if waited_for is None:
        return Recalled(scope, version, None, in_flight)
    # Remembered while writes were in flight: it tells the part until one of them ends.
    still = in_flight.intersection(waited_for)
    return Recalled(scope, version, unchanged(request, etag) if still == frozenset(waited_for) else None, still)


def remember(request, recalled: Recalled, etag: str) -> None:
    """Keep `etag` as what the part shows at the version held_at was asked for, for the next polls."""
    key = _version_key(request, recalled.scope, recalled.version)
    cache.set(key, (etag, tuple(sorted(recalled.in_flight))), REMEMBER_SECONDS)
