"""A job's logs while the Redis that shares reads between viewers is down: each viewer reads the cluster, no 500."""

from __future__ import annotations

import pytest
from django.test import override_settings

from portal import settings as configured
from tests.outages import refused_redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_job(submit, cycle):
    job = submit(name="train", replicas=[{"role": "Worker", "count": 2, "gpu": 1}], simulate={"duration": 3600})
    cycle()
    job.refresh_from_db()
    return job


def test_the_job_pages_logs_are_read_from_the_cluster_while_redis_is_down(login, owner, running_job, htmx):
    assert configured._REDIS_URL, "the suite runs with Redis"
    down = {**configured.CACHES["logs"], "LOCATION": refused_redis()}
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                                   "throttle": down, "logs": down}):  # fmt: skip
        response = login(owner).get(f"/jobs/{running_job.pk}/logs/", **htmx)

    assert response.status_code == 200
    assert "worker-0" in response.content.decode().lower()
