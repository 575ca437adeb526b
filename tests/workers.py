"""A real Celery worker process on the test database and the test Redis, for tests whose behaviour is the worker's."""

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


def every_queue() -> tuple[str, ...]:
    """Returns the queues tasks are sent to: Celery's default (the loop's) and each route's."""
    routed = (route["queue"] for route in (app.conf.task_routes or {}).values())
    return tuple(dict.fromkeys((app.conf.task_default_queue, *routed)))


@contextmanager
def celery_worker(*, queues: tuple[str, ...] | None = None, flush: bool = True, **env: str):
    """Starts a worker consuming `queues` (every queue unless given) with `env` added; stops it on leaving.

    The broker is emptied first unless `flush` is off (a second worker beside a first). Each
    worker is named after its queues, so two run side by side as production's worker and notifier.
    """
    broker = settings.CELERY_BROKER_URL
    if flush:
        redis.Redis.from_url(broker).flushdb()
    queues = queues or every_queue()
    db = connection.settings_dict
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--loglevel=WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat", f"--queues={','.join(queues)}",
         f"--hostname={'-'.join(queues)}@%h"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.test_settings", "CELERY_BROKER_URL": broker,
             "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
             **env},
    )  # fmt: skip
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
