"""The Redis cache backend of the throttle and metrics caches: Django's, with one client per connection pool."""

from __future__ import annotations

import pytest

from portal.cache import RedisCache

REDIS = "redis://127.0.0.1:6379/13"


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
