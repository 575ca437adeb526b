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
