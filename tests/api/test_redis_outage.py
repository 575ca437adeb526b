"""The API while its throttle's Redis is down or silent: it answers (not rate-limited), never a 500, never a hang."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from portal import settings as configured
from tests.api.conftest import bearer
from tests.outages import refused_redis, silent_redis

pytestmark = pytest.mark.django_db


def caches_on(url: str) -> dict:
    """The caches as the settings configure them with Redis, pointed at `url`."""
    assert configured._REDIS_URL, "the suite runs with Redis"
    return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            **{alias: {**configured.CACHES[alias], "LOCATION": url} for alias in ("throttle", "logs")}}


def test_the_api_answers_while_redis_refuses_connections(tokens, caplog):
    with override_settings(CACHES=caches_on(refused_redis())):
        responses = [bearer(tokens["maps_token"]).get("/api/v1/jobs/") for _ in range(3)]

    assert [response.status_code for response in responses] == [200, 200, 200]
    assert "cannot be reached" in caplog.text


def test_a_silent_redis_costs_the_api_about_a_second_not_a_request_each(tokens):
    with silent_redis() as url, override_settings(CACHES=caches_on(url)):
        started = time.monotonic()
        responses = [bearer(tokens["maps_token"]).get("/api/v1/jobs/") for _ in range(5)]
        took = time.monotonic() - started

    assert [response.status_code for response in responses] == [200] * 5
    assert took < 4, f"5 requests took {took:.1f} s"
