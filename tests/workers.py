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

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def celery_worker(**env: str):
    """Starts a worker (the broker's queue emptied first) with `env` added; stops it on leaving."""
    broker = settings.CELERY_BROKER_URL
    redis.Redis.from_url(broker).flushdb()
    db = connection.settings_dict
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--loglevel=WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
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
