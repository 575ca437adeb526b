"""Fixtures for the page tests: a logged-in client per persona and a cluster the loop has read."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def htmx():
    """Headers of an htmx request."""
    return {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def csrf_client():
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def fill_and_wait(submit, cycle):
    """Fill both nodes with one running job of maps, then queue `count` jobs of 8 GPUs that must wait."""

    def _fill(count: int = 1, prefix: str = "waiting", **kwargs):
        submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}], **kwargs)
        cycle()
        jobs = [submit(name=f"{prefix}-{i}", replicas=[{"role": "Worker", "count": 1, "gpu": 8}], **kwargs)
                for i in range(count)]  # fmt: skip
        cycle()
        for job in jobs:
            job.refresh_from_db()
        return jobs

    return _fill
