"""Structured logs: with LOG_FORMAT=json, one JSON object per line.

Log collectors (Loki, Cloud Logging, Elasticsearch) index each key, so an
operator can ask for every decision about one job or one team. The admission
loop passes its fields as `extra` (job, team, rule, reason); they become keys
of the object beside time, level, logger and message.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: time, level, logger, message, the extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra value json cannot encode (a datetime, a model) still logs, as its text.
        return json.dumps(entry, default=str, ensure_ascii=False)


def logging_config(*, fmt: str, level: str) -> dict:
    """Returns the dictConfig for Django, Celery and gunicorn: every line to stderr in `fmt` ("plain" or "json")."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": JsonFormatter},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": fmt}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"}},
    }
