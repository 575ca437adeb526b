"""A real Celery worker process on the test database and the test Redis, for tests whose behaviour is the worker's.

Several test processes may run workers at once on one Redis: each owns the broker keys under its own
prefix (`broker_prefix`, set in portal/test_settings.py), gives it to the workers it starts, and empties
only those keys, so none takes or deletes another's tasks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from portal.celery import app

ROOT = Path(__file__).resolve().parents[1]
PREFIX_VARIABLE = "GANGWAY_TEST_BROKER_PREFIX"  # read by portal/test_settings.py


def every_queue() -> tuple[str, ...]:
    """Returns the queues tasks are sent to: Celery's default (the loop's) and each route's."""
    routed = (route["queue"] for route in (app.conf.task_routes or {}).values())
    return tuple(dict.fromkeys((app.conf.task_default_queue, *routed)))


def broker_prefix() -> str:
    """Returns the prefix of the broker keys this test process owns: its queues, their unacked messages and
    their bindings (kombu's `global_keyprefix`)."""
    prefix = (app.conf.broker_transport_options or {}).get("global_keyprefix", "")
    if not prefix:
        raise RuntimeError("The test broker has no key prefix of its own: run the tests with portal.test_settings "
                           "and a redis:// CELERY_BROKER_URL.")  # fmt: skip
    return prefix


def forget_own() -> int:
    """Deletes the broker keys this test process owns, once it ends; returns how many (0 for a broker other
    than Redis, or none reachable: nothing of this process is left there)."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return 0
    try:
        return forget(broker_prefix())
    except redis.ConnectionError:
        return 0


def forget(prefix: str) -> int:
    """Deletes the broker keys under `prefix` (tasks left by an earlier test, bindings); returns how many."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    return client.delete(*keys) if keys else 0


@contextmanager
def celery_worker(*, queues: tuple[str, ...] | None = None, flush: bool = True, pool: str = "solo", **env: str):
    """Starts a worker consuming `queues` (every queue unless given) with `env` added; stops it on leaving.
    `pool`: solo, one task at a time in the worker's process, or prefork (production's, with one child), the
    one that enforces time limits.

    The worker uses this process's broker keys (`env` may name others: a test standing for another test
    process), which are emptied first unless `flush` is off (a second worker beside a first). Each worker
    is named after its queues, so two run side by side as production's worker and notifier.
    """
    broker = settings.CELERY_BROKER_URL
    prefix = env.get(PREFIX_VARIABLE) or broker_prefix()
    if flush:
        forget(prefix)
    queues = queues or every_queue()
    db = connection.settings_dict
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", f"--pool={pool}", "--concurrency=1",
         "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat",
         f"--queues={','.join(queues)}", f"--hostname={'-'.join(queues)}@%h"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.test_settings", "CELERY_BROKER_URL": broker,
             "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
             PREFIX_VARIABLE: prefix, **env},
    )  # fmt: skip
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
