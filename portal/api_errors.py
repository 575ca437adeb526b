"""DRF's exception handler, plus a JSON answer for a request body over the size limit."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    """DRF's answer; for an oversized body, 413 with a sentence instead of Django's HTML 400."""
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
        return Response({"detail": f"The request body is larger than {limit} KiB; a job spec is a few KiB."},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)  # fmt: skip
    return drf_exception_handler(exc, context)
