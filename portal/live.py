"""Polled fragments that answer 304 when nothing they show has changed.

A live part of a page is rendered with `data-etag` (see templates/partials/live_attrs.html);
static/js/gangway.js sends it back as If-None-Match on the next poll, and the view
answers 304 Not Modified, before rendering anything, when the fingerprint of what the
part shows is the same. base.html tells htmx not to swap a 304.
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.http import HttpResponse, HttpResponseNotModified
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers

VARY = ("HX-Request", "Cookie")
# Relative times a part shows ("waiting 12 min", "about 40 min") move on with the
# clock even when no row changes: the fingerprint turns over once a minute for them.
CLOCK_STEP = 60


def fingerprint(request, *parts, clock: bool = False) -> str:
    """A strong ETag (quoted) of what a part shows: `parts`, the viewer, and the minute when `clock`."""
    viewer = (request.user.pk, request.user.is_staff)
    minute = int(timezone.now().timestamp()) // CLOCK_STEP if clock else None
    digest = hashlib.blake2b(repr((viewer, minute, parts)).encode(), digest_size=12).hexdigest()
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


def _version_key(request, scope: str, version) -> str:
    minute = int(timezone.now().timestamp()) // CLOCK_STEP
    raw = repr((scope, request.user.pk, request.user.is_staff, version, minute)).encode()
    return "gangway:live:" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def held_at(request, scope: str, version) -> HttpResponse | None:
    """A 304 when the poll holds the ETag remembered for `scope` at this `version`; None otherwise."""
    if not request.htmx or not request.headers.get("If-None-Match"):
        return None
    etag = cache.get(_version_key(request, scope, version))
    return unchanged(request, etag) if etag else None


def remember(request, scope: str, version, etag: str) -> None:
    """Keep `etag` as what `scope` shows at `version`, for the next polls (see held_at)."""
    cache.set(_version_key(request, scope, version), etag, REMEMBER_SECONDS)
