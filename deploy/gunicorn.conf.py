"""gunicorn's settings in the image: port, processes, and logs in Gangway's format (LOG_FORMAT)."""

import os

from portal.logging import logging_config

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
timeout = 60
graceful_timeout = 30
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
