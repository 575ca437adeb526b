"""A polled part is never held stale by the ETag remembered for it (portal.live) when writes commit out of order.

PostgreSQL hands out ids in insert order, not commit order: a write that takes the id 100 and commits after
one that took 101 leaves the version (the maxima of scheduling.selectors.live_version) where it was. These
tests race two real transactions, each on a connection of its own, on real PostgreSQL.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from jobs.models import JobEvent
from jobs.services import job_cancel
from scheduling.selectors import live_version
from tenants.services import quota_update
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def nothing_remembered():
    """No ETag remembered by an earlier test (the cache outlives a test's database)."""
    cache.clear()
    yield
    cache.clear()


def poll(client, path, etag=None):
    headers = {"HTTP_HX_REQUEST": "true"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get(path, **headers)


def poll_between(client, path: str, *, late, early) -> dict:
    """Runs `late` in a transaction that stays open while `early` runs and commits on a connection of its own
    and the part at `path` is polled twice (read, then answered from what was remembered); then `late`
    commits. Returns what the polls saw: `etag`, `body`, `again` (the second poll's status) and `version`."""
    written, polled = threading.Event(), threading.Event()
    seen: dict = {}

    def late_write() -> None:
        with transaction.atomic():
            late()
            written.set()
            assert polled.wait(30), "the polls never ended"

    def early_write_and_polls() -> None:
        try:
            assert written.wait(30), "the late write never ran"
            early()
            first = poll(client, path)
            assert first.status_code == 200
            seen.update(etag=first["ETag"], body=first.content.decode(), version=live_version())
            seen["again"] = poll(client, path, first["ETag"]).status_code
        finally:
            polled.set()

    assert run_together(late_write, early_write_and_polls, timeout=60) == []
    return seen


@contextmanager
def write_in_flight():
    """A transaction on a connection of its own that holds a transaction id (as any write does) and stays
    open for the block; it changes nothing a page shows."""
    other = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()")
        yield
    finally:
        other.rollback()
        other.close()


def test_a_cancel_that_commits_after_a_later_one_leaves_the_queue_once_it_commits(login, staff, fill_and_wait):
    late, early = fill_and_wait(2)
    client = login(staff)
    seen = poll_between(client, "/?part=queue", late=lambda: job_cancel(job=late, actor=staff),
                        early=lambda: job_cancel(job=early, actor=staff))  # fmt: skip
    # The race as it must be: the late cancel's events took the lower ids, so its commit moved no maximum.
    cancelled = dict(JobEvent.objects.filter(kind="cancelled").values_list("job_id", "pk"))
    assert cancelled[late.pk] < cancelled[early.pk]
    assert live_version() == seen["version"]
    assert late.name in seen["body"] and early.name not in seen["body"]
    assert seen["again"] == 304  # while the late cancel was in flight, the remembered ETag answered
    fresh = poll(client, "/?part=queue", seen["etag"])
    assert fresh.status_code == 200
    assert late.name not in fresh.content.decode()
    with CaptureQueriesContext(connection) as queries:  # and the part is remembered again, settled
        assert poll(client, "/?part=queue", fresh["ETag"]).status_code == 304
    assert len(queries) <= 3, [q["sql"] for q in queries]  # the session, the user, the world's version


def test_a_quota_change_that_commits_after_a_later_one_shows_on_the_team_tiles(login, staff, maps, vision):
    client = login(staff)
    path = "/teams/maps/?part=tiles"

    def change(team, nominal):
        return lambda: quota_update(team=team, quotas={"gpu": {"nominal": nominal, "borrowing_limit": 8,
                                                               "lending_limit": None}}, actor=staff)  # fmt: skip

    seen = poll_between(client, path, late=change(maps, 3), early=change(vision, 5))
    assert live_version() == seen["version"]
    assert seen["again"] == 304
    fresh = poll(client, path, seen["etag"])
    assert fresh.status_code == 200 and fresh["ETag"] != seen["etag"]
    assert poll(client, path, fresh["ETag"]).status_code == 304


def test_a_late_cancel_shows_while_another_write_read_with_it_stays_open(login, staff, fill_and_wait):
    late, early = fill_and_wait(2)
    client = login(staff)
    with write_in_flight():  # open before, during and after the race: it must not hold the part back
        seen = poll_between(client, "/?part=queue", late=lambda: job_cancel(job=late, actor=staff),
                            early=lambda: job_cancel(job=early, actor=staff))  # fmt: skip
        assert live_version() == seen["version"] and seen["again"] == 304
        fresh = poll(client, "/?part=queue", seen["etag"])
        assert fresh.status_code == 200 and late.name not in fresh.content.decode()
        assert poll(client, "/?part=queue", fresh["ETag"]).status_code == 304


@pytest.mark.parametrize("path", ["/?part=nodes", "/teams/maps/?part=tiles"])
def test_a_write_in_flight_costs_an_unchanged_poll_one_query_and_one_read_once_it_ends(login, staff, fill_and_wait,
                                                                                      path):  # fmt: skip
    fill_and_wait(3)
    client = login(staff)
    etag = poll(client, path)["ETag"]
    with CaptureQueriesContext(connection) as quiet:
        assert poll(client, path, etag).status_code == 304
    cache.clear()
    with write_in_flight():
        assert poll(client, path, etag).status_code == 304  # read, and remembered until the write ends
        with CaptureQueriesContext(connection) as waiting:
            assert poll(client, path, etag).status_code == 304
    with CaptureQueriesContext(connection) as ended:
        assert poll(client, path, etag).status_code == 304  # read once more, now settled
    with CaptureQueriesContext(connection) as settled:
        assert poll(client, path, etag).status_code == 304
    assert len(waiting) == len(quiet) + 1  # which write transactions are still in flight
    assert len(ended) > len(waiting)
    assert len(settled) == len(quiet)
