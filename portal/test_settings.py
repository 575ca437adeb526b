"""Settings for the test suite: real PostgreSQL and Redis on their standard ports.

Only defaults are set here, so `DATABASE_URL=... pytest` still points the suite
elsewhere.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")
os.environ.setdefault("CELERY_RESULT_BACKEND", "redis://127.0.0.1:6379/14")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
# The suite talks plain HTTP to the test client and to live_server; header tests turn these back on.
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SECURE_COOKIES", "0")
# Tests scrape /metrics without a token; the tests of its guard close it again.
os.environ.setdefault("METRICS_PUBLIC", "1")
# Page tests post far faster than a person; the page rate limit's own tests set a small one.
os.environ.setdefault("PAGE_RATE", "100000/min")
# Tests change rows a page shows without an event (an ORM update): each fit preview reads them afresh, but in the
# tests of sharing one reading (tests/pages/test_fit_preview_shared.py).
os.environ.setdefault("FIT_PREVIEW_REUSE", "0")

from portal.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AXES_ENABLED = False  # `client.login()` passes no request; the lockout tests turn it on

# One test database per test process (pytest-django adds an xdist worker's name), so several runs on one
# machine never collide.
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("GANGWAY_TEST_DB", f"test_gangway_{os.getpid()}")}

# The Redis keys of this test process only: a Celery worker it starts is given the same prefix
# (tests/workers.py), so that several test processes, of one run or of several, share one Redis.
TEST_KEY_PREFIX = os.environ.get("GANGWAY_TEST_BROKER_PREFIX") or f"gangway-test-{os.getpid()}:"
# Its broker keys (its queues, their unacked messages, bindings): no process takes another's tasks.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "global_keyprefix": TEST_KEY_PREFIX}
# Its cache keys: a Redis cache's clear() deletes only the keys under its own prefix (portal.cache), so one
# process clearing its throttle counts, shared log reads or metrics leaves every other process's alone.
TEST_CACHE_PREFIX = f"{TEST_KEY_PREFIX}cache"
for _name, _cache in CACHES.items():  # noqa: F405
    if str(_cache.get("LOCATION", "")).startswith(("redis://", "rediss://")):
        CACHES[_name] = {**_cache, "KEY_PREFIX": TEST_CACHE_PREFIX}  # noqa: F405
