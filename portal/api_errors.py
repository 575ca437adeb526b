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
RETRY_AFTER = {"Retry-After": str(DATABASE_RETRY_AFTER)}


def database_unavailable(error: BaseException | None) -> str:
    """The 503's sentence ("The database cannot be reached for the moment: retry in 15 s."), logged, when `error`,
    or an error it was raised while handling, is the database out of service for a while
    (`portal.database_errors`); "" when none is. Django's session middleware, for one, turns a session it could
    not save into a 400 (SessionInterrupted) raised while handling the database's error."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        problem = unavailable_problem(error)
        if problem:
            log.warning("answered 503: %s: %s", problem, error)
            return f"{problem}: retry in {DATABASE_RETRY_AFTER} s."
        seen.add(id(error))
        error = error.__context__
    return ""


def exception_handler(exc, context):
    """DRF's answer; for an oversized body, 413 with a sentence instead of Django's HTML 400; for a database out
    of service for a while, 503 with Retry-After, so that a client retries (the CLI with the same idempotency
    key) rather than take the 500 of an error in the code. The same error raised outside a view's own handling
    (a middleware, the browsable API's page) gets the same answer from `portal.views.server_error`."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
        return Response({"detail": f"The request body is larger than {limit} KiB; a job spec is a few KiB."},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)  # fmt: skip
    unavailable = database_unavailable(exc)
    if unavailable:
        set_rollback()
        return Response({"detail": unavailable}, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=RETRY_AFTER)
    return drf_exception_handler(exc, context)
