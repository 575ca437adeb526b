"""The Redis cache backend of the throttle and metrics caches: Django's, with one client per connection pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from portal.cache import RedisCache

REDIS = settings.TEST_CACHE_REDIS  # this test process's own database (portal/test_settings.py)


def test_it_keeps_one_client_for_every_call():
    cache = RedisCache(REDIS, {"KEY_PREFIX": "test-cache"})
    first = cache._cache.get_client("a", write=True)
    assert cache._cache.get_client("b", write=True) is first
    assert cache._cache.get_client("c") is first  # one server: reads and writes share the pool


def test_it_stores_reads_counts_and_expires_like_djangos():
    cache = RedisCache(REDIS, {"KEY_PREFIX": "test-cache"})
    cache.delete_many(["history", "count"])
    cache.set("history", [3.0, 2.0, 1.0], 60)
    assert cache.get("history") == [3.0, 2.0, 1.0]
    assert cache.add("count", 1, 60) and not cache.add("count", 5, 60)
    assert cache.incr("count") == 2
    cache.set("history", [], 0)  # a timeout of 0 expires at once
    assert cache.get("history", "gone") == "gone"
    cache.delete_many(["history", "count"])


def test_incr_is_one_round_trip_and_refuses_a_missing_key():
    cache = RedisCache(REDIS, {"KEY_PREFIX": "test-cache"})
    cache.delete("count")
    with pytest.raises(ValueError):
        cache.incr("count")
    assert cache.get("count") is None  # not created by the refused incr
    cache.add("count", 1, 60)
    client = cache._cache.get_client("count", write=True)
    calls = []
    original = client.execute_command
    client.execute_command = lambda *args, **kwargs: calls.append(args[0]) or original(*args, **kwargs)
    try:
        assert cache.incr("count", 2) == 3
    finally:
        del client.execute_command
    assert calls == ["EVALSHA"]
    assert 0 < client.ttl(cache.make_and_validate_key("count")) <= 60  # the expiry is kept
    cache.delete("count")


def _cache_locations(worker: str | None) -> dict[str, str]:
    """Returns each cache's location as the test settings give it to a test process run as xdist `worker`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    if worker is not None:
        env["PYTEST_XDIST_WORKER"] = worker
    code = ("import json, portal.test_settings as s; "
            "print(json.dumps({n: str(c.get('LOCATION', '')) for n, c in s.CACHES.items()}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_each_test_process_keeps_its_redis_caches_in_a_database_of_its_own_apart_from_the_broker():
    """A cache's clear() empties its whole database: two xdist workers, or a worker and the broker, sharing
    one would empty each other's keys mid-test."""
    broker_db = settings.CELERY_BROKER_URL.rsplit("/", 1)[1]
    databases = {}
    for worker in (None, "gw0", "gw1", "gw5"):
        locations = _cache_locations(worker)
        on_redis = {location for location in locations.values() if location.startswith("redis://")}
        assert len(on_redis) == 1, locations  # throttle, logs and metrics: one database per process
        databases[worker] = on_redis.pop().rsplit("/", 1)[1]
    assert broker_db not in databases.values()
    assert databases[None] == databases["gw0"] == "13"
    assert len({databases["gw0"], databases["gw1"], databases["gw5"]}) == 3
