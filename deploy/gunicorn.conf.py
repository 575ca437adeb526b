"""gunicorn's settings in the image: port, processes and their threads, logs in Gangway's format (LOG_FORMAT),
and Django's system checks before the web starts."""

import os
import subprocess
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from portal import env
from portal.logging import logging_config

ROOT = Path(__file__).resolve().parents[1]

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
# Threaded workers: a request that waits (a whole log's download streams for up to 40 s, a read of the
# cluster, a slow query) holds one of a process's WEB_THREADS threads, not the process, so the pages' polls
# and the probes go on being answered beside it. Each thread keeps its own database connection
# (CONN_MAX_AGE): a pod holds up to WEB_CONCURRENCY x WEB_THREADS of them (README, "Deploying").
# A bad value stops the web before it listens, naming the variable, as the Django settings do.
try:
    workers = env.integer("WEB_CONCURRENCY", 2, minimum=1)
    threads = env.integer("WEB_THREADS", 8, minimum=1)
except ImproperlyConfigured as error:
    sys.exit(f"The web did not start: {error}")
worker_class = "gthread"
# A threaded worker's main loop tells the master it is alive while its threads serve: `timeout` restarts a
# worker whose loop is stuck, it no longer ends a long request. Requests bound their own waits (the download's
# 40 s, the cluster's and Redis's timeouts, the webhook deadline).
timeout = 60
# On SIGTERM, requests in flight have this long to finish: the longest request the web serves, a whole-log
# download (DOWNLOAD_SECONDS, 40 s, scheduling/log_download.py), with 5 s to spare. The web pod's
# terminationGracePeriodSeconds (deploy/kubernetes/web.yaml) leaves room for it after its preStop sleep.
graceful_timeout = 45
# Worker heartbeats in memory: the root file system may be read-only.
worker_tmp_dir = "/dev/shm"
# Probes hit /healthz and /readyz every few seconds; request lines would drown the decisions.
accesslog = None

# An unknown LOG_FORMAT is left for the Django settings to refuse, naming the variable.
_format = os.environ.get("LOG_FORMAT", "plain")
logconfig_dict = logging_config(
    fmt=_format if _format in ("plain", "json") else "plain", level=os.environ.get("LOG_LEVEL", "INFO")
)
# gunicorn's own loggers go through the same handler as the application's. gunicorn writes
# request lines whenever it is given a logging config, whatever accesslog says: they are
# logged at INFO, so the access logger's level keeps them out.
logconfig_dict["loggers"].update(
    {"gunicorn.error": {"level": "INFO", "propagate": True}, "gunicorn.access": {"level": "WARNING", "propagate": True}}
)


def on_starting(server):
    """Runs Django's system checks (`manage.py check`) before the master binds its port or starts a worker, as
    the worker, notifier and beat (`wait_for_schema`) and migrate run them when they start: a setting they
    refuse (a bad WEBHOOK_DEADLINE, say) stops the web too, the checks' report printed as `manage.py` prints
    it. Run in a process of their own, so that the master imports no application code and each worker
    loads it fresh."""
    checked = subprocess.run([sys.executable, str(ROOT / "manage.py"), "check"], cwd=ROOT, check=False)
    if checked.returncode != 0:
        sys.exit("The web did not start: Django's system checks failed (above).")
