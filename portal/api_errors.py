"""DRF's exception handler, plus JSON answers for a request body over the size limit and a database out of service."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler, set_rollback

from portal.database_errors import unavailable_problem

log = logging.getLogger("gangway.api")
# Seconds a client is asked to wait while the database is out of service: a PostgreSQL failover takes tens of
# seconds, and the CLI's four retries after this long span a minute.
DATABASE_RETRY_AFTER = 15


def exception_handler(exc, context):
    """DRF's answer; for an oversized body, 413 with a sentence instead of Django's HTML 400; for a database out
    of service for a while (`portal.database_errors`), 503 with Retry-After, so that a client retries (the CLI
    with the same idempotency key) rather than take the 500 of an error in the code."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
        return Response({"detail": f"The request body is larger than {limit} KiB; a job spec is a few KiB."},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)  # fmt: skip
    problem = unavailable_problem(exc)
    if problem:
        set_rollback()
        log.warning("answered 503: %s: %s", problem, exc)
        return Response({"detail": f"{problem}: retry in {DATABASE_RETRY_AFTER} s."},
                        status=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(DATABASE_RETRY_AFTER)})  # fmt: skip
    return drf_exception_handler(exc, context)
