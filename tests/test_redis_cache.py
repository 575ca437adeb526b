"""The Redis cache backend of the throttle and metrics caches: Django's, with one client per connection pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from portal.cache import RedisCache

REDIS = settings.CACHES["metrics"]["LOCATION"]  # the test Redis (portal/test_settings.py)


def test_it_keeps_one_client_for_every_call():
    cache = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-test-cache"})
    first = cache._cache.get_client("a", write=True)
    assert cache._cache.get_client("b", write=True) is first
    assert cache._cache.get_client("c") is first  # one server: reads and writes share the pool


def test_it_stores_reads_counts_and_expires_like_djangos():
    cache = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-test-cache"})
    cache.delete_many(["history", "count"])
    cache.set("history", [3.0, 2.0, 1.0], 60)
    assert cache.get("history") == [3.0, 2.0, 1.0]
    assert cache.add("count", 1, 60) and not cache.add("count", 5, 60)
    assert cache.incr("count") == 2
    cache.set("history", [], 0)  # a timeout of 0 expires at once
    assert cache.get("history", "gone") == "gone"
    cache.delete_many(["history", "count"])


def test_incr_is_one_round_trip_and_refuses_a_missing_key():
    cache = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-test-cache"})
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



def test_clear_deletes_its_own_keys_only_and_leaves_the_broker_and_other_caches_theirs():
    """Django's clear() is FLUSHDB, which would take the broker's queued tasks and every other cache's keys from
    the database they share."""
    own = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-own[1]*"})  # glob characters, literally
    longer = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-own[1]*x"})
    other = RedisCache(REDIS, {"KEY_PREFIX": f"{settings.TEST_CACHE_PREFIX}-own[2]*"})
    client = own._cache.get_client(None, write=True)
    queued = f"{settings.TEST_KEY_PREFIX}clear-test-queue"  # as a broker key of this process's
    try:
        own.set_many({f"k{n}": n for n in range(2500)}, 60)  # more than one batch of deletes
        longer.set("k1", "kept", 60)
        other.set("k1", "kept", 60)
        client.rpush(queued, "a task")
        assert own.clear()
        assert own.get_many(["k0", "k1", "k2499"]) == {}
        assert client.exists(*(own.make_key(f"k{n}") for n in range(2500))) == 0
        assert longer.get("k1") == "kept" and other.get("k1") == "kept"
        assert client.lrange(queued, 0, -1) == [b"a task"]
    finally:
        for cache in (own, longer, other):
            cache.clear()
        client.delete(queued)


def _cache_prefixes() -> dict[str, str]:
    """Returns each Redis cache's key prefix, and the broker's, as the test settings give them to a new test
    process."""
    env = {k: v for k, v in os.environ.items() if k != "GANGWAY_TEST_BROKER_PREFIX"}
    code = ("import json, portal.test_settings as s; print(json.dumps({**{n: c.get('KEY_PREFIX') for n, c in "
            "s.CACHES.items() if 'redis' in c['BACKEND'].lower()}, "
            "'broker': s.CELERY_BROKER_TRANSPORT_OPTIONS['global_keyprefix']}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_each_test_process_keeps_its_cache_keys_under_a_prefix_of_its_own():
    """Two test processes (xdist's, or two runs) clear only their own caches' keys."""
    first, second = _cache_prefixes(), _cache_prefixes()
    assert {"throttle", "logs", "metrics"} <= first.keys()
    for prefixes in (first, second):
        caches_ = {name: prefix for name, prefix in prefixes.items() if name != "broker"}
        assert set(caches_.values()) == {prefixes["broker"] + "cache"}, prefixes
    assert first["throttle"] != second["throttle"]
    # This process's own caches are under its own prefix, which a worker it starts is given (tests/workers.py).
    assert settings.CACHES["throttle"]["KEY_PREFIX"] == settings.TEST_CACHE_PREFIX
    assert settings.TEST_CACHE_PREFIX.startswith(settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"])
