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
# Page tests post far faster than a person; the page rate limit's own tests set a small one.
os.environ.setdefault("PAGE_RATE", "100000/min")

from portal.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AXES_ENABLED = False  # `client.login()` passes no request; the lockout tests turn it on

# One test database per test run, so several runs on one machine never collide.
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("GANGWAY_TEST_DB", f"test_gangway_{os.getpid()}")}

# The broker keys of this test process only (its queues, their unacked messages, bindings), so that several
# test processes run real workers at once on one Redis without taking each other's tasks; a worker it starts
# is given the same prefix (tests/workers.py).
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,
        "global_keyprefix": os.environ.get("GANGWAY_TEST_BROKER_PREFIX") or f"gangway-test-{os.getpid()}:",
    }

# Clearing a Redis cache empties its whole database (FLUSHDB), broker keys included. The suite's caches are
# kept in a database of their own, 13, apart from the broker's; under pytest-xdist each worker process (gw0,
# gw1, ...) has its own, counting down (13, 12, ...), so one worker's clear() never empties another's throttle
# counts, shared log reads or metrics. A Celery worker that a test starts inherits the variable, and so the same
# database. Tests that make a Redis cache of their own use TEST_CACHE_REDIS too.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_CACHE_REDIS_DB = 13 - (int(_XDIST_WORKER[2:]) % 12 if _XDIST_WORKER[2:].isdigit() else 0)
TEST_CACHE_REDIS = f"{CELERY_BROKER_URL.rsplit('/', 1)[0]}/{TEST_CACHE_REDIS_DB}"  # noqa: F405
for _name, _cache in CACHES.items():  # noqa: F405
    if str(_cache.get("LOCATION", "")).startswith(("redis://", "rediss://")):
        CACHES[_name] = {**_cache, "LOCATION": TEST_CACHE_REDIS}  # noqa: F405
