"""Django's Redis cache backend, keeping one redis client per connection pool, and one that
survives Redis being down (`BestEffortRedisCache`).

Django's RedisCache builds a new `redis.Redis` object around its connection
pool for every call; building one costs more than the round trip it makes
(about 0.1 ms), and the API's throttle makes two calls on every request.
The client holds nothing but the pool and is safe to share, so each
pool keeps one. The metrics cache uses this backend; the throttle and logs caches use
`BestEffortRedisCache`.

`clear` deletes only the cache's own keys (its KEY_PREFIX), where Django's empties the whole
database, broker queues included when the caches share the broker's Redis database.

`incr` is one atomic round trip (a script: INCRBY only when the key exists)
where Django's makes two, EXISTS then INCRBY, and lets a key that expires
between them come back without an expiry.
"""

from __future__ import annotations

import logging
import re
import time
from functools import wraps

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache, RedisCacheClient
from redis.exceptions import ConnectionError as RedisUnreachable, TimeoutError as RedisTimeout

log = logging.getLogger("gangway.cache")


class PooledClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}  # id of a pool -> the redis.Redis around it; pools live as long as this object
        self._scripts = {}  # id of a client -> its registered incr script

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client

    def incr(self, key, delta):
        client = self.get_client(key, write=True)
        script = self._scripts.get(id(client))
        if script is None:
            script = self._scripts[id(client)] = client.register_script(_INCR_EXISTING)
        value = script(keys=[key], args=[delta])
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return value


_INCR_EXISTING = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end"


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = PooledClient

    def clear(self):
        """Deletes this cache's own keys, those under its KEY_PREFIX, where Django's empties the whole Redis
        database (FLUSHDB): the caches share a database with the broker's queues unless REDIS_URL says
        otherwise, and clearing one must take neither the tasks waiting there nor another cache's keys.
        Reads the keys Django's default key function makes (`<KEY_PREFIX>:<version>:<key>`)."""
        client = self._cache.get_client(None, write=True)
        batch = []
        for key in client.scan_iter(match=f"{_glob_escaped(self.key_prefix)}:*", count=1000):
            batch.append(key)
            if len(batch) == 1000:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
        return True


def _glob_escaped(text: str) -> str:
    """Returns `text` matched literally in a Redis SCAN pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _or_miss(answer):
    """Wraps a cache method: while Redis cannot be reached, it answers `answer(*args)`, as for a miss."""

    def decorate(method):
        @wraps(method)
        def wrapped(self, *args, **kwargs):
            if time.monotonic() < self._down_until:
                return answer(*args, **kwargs)
            try:
                return method(self, *args, **kwargs)
            except (RedisUnreachable, RedisTimeout) as error:
                self._down_until = time.monotonic() + self.RETRY_AFTER
                log.warning("The Redis cache cannot be reached (%s); its readers go without it for %d s: API "
                            "requests and page posts are not rate-limited, each viewer reads a job's logs itself.",
                            error, self.RETRY_AFTER)  # fmt: skip
                return answer(*args, **kwargs)

        return wrapped

    return decorate


class BestEffortRedisCache(RedisCache):
    """A cache whose loss costs only what it saves: while Redis cannot be reached (a restart, a lost
    route), reads miss, writes are dropped, and `add` answers True, so that a caller claiming work
    (the logs' one reader) does it itself; a warning is logged, and the process tries Redis again
    RETRY_AFTER seconds later instead of on every call. Connecting and each command give up after
    a second (OPTIONS may say otherwise), so a Redis that never answers holds no web worker.

    For the caches that save work or count requests (the API throttle and the job logs): a 500 on
    every API call, or a web worker held by each, is worse than going unthrottled for a while.
    """

    RETRY_AFTER = 5  # seconds
    TIMEOUTS = {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}

    def __init__(self, server, params):
        super().__init__(server, params)
        self._options = {**self.TIMEOUTS, **self._options}
        self._down_until = 0.0

    get = _or_miss(lambda key, default=None, version=None: default)(RedisCache.get)
    get_many = _or_miss(lambda keys, version=None: {})(RedisCache.get_many)
    has_key = _or_miss(lambda key, version=None: False)(RedisCache.has_key)
    add = _or_miss(lambda *args, **kwargs: True)(RedisCache.add)
    set = _or_miss(lambda *args, **kwargs: None)(RedisCache.set)
    set_many = _or_miss(lambda *args, **kwargs: [])(RedisCache.set_many)
    touch = _or_miss(lambda *args, **kwargs: False)(RedisCache.touch)
    delete = _or_miss(lambda *args, **kwargs: False)(RedisCache.delete)
    delete_many = _or_miss(lambda *args, **kwargs: None)(RedisCache.delete_many)
    incr = _or_miss(lambda key, delta=1, version=None: delta)(RedisCache.incr)
