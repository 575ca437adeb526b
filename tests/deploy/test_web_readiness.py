"""The web's readiness probe: a pod leaves the Service only for what stops its pages, never for Redis.

Every web pod shares one Redis; a probe that checked it would take them all out of the Service at once
while it restarts or fails over, and the Ingress would answer 503 for pages each pod could serve. The probe
keeps the database and the schema (an upgrade's new pod waits for its migrations); the full /readyz, for
monitoring, still names the broker.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from portal import settings as configured
from tests.deploy.manifests import by_kind, source_objects
from tests.outages import refused_redis

pytestmark = pytest.mark.django_db


def probe_path() -> str:
    [web] = by_kind(source_objects(), "Deployment")["gangway-web"]["spec"]["template"]["spec"]["containers"]
    return web["readinessProbe"]["httpGet"]["path"]


def redis_down() -> override_settings:
    """The broker and every Redis cache refused, as while the one Redis restarts."""
    down = refused_redis()
    caches = {name: ({**cache, "LOCATION": down} if str(cache.get("LOCATION", "")).startswith("redis") else cache)
              for name, cache in configured.CACHES.items()}  # fmt: skip
    return override_settings(CELERY_BROKER_URL=down, CACHES=caches)


def test_a_pod_that_serves_its_pages_while_redis_is_down_stays_ready(login, member):
    client = login(member)
    with redis_down():
        pages = [client.get(path).status_code for path in ("/", "/jobs/")]
        probe = client.get(probe_path())
        full = client.get("/readyz")

    assert pages == [200, 200]
    assert probe.status_code == 200, probe.json().get("failing")
    assert full.status_code == 503 and full.json()["failing"] == ["broker"]  # what monitoring sees


def test_the_probe_still_keeps_a_pod_out_until_its_migrations_are_applied(client, monkeypatch):
    monkeypatch.setattr("portal.health.missing_migrations", lambda: ["jobs.0099_next"])

    response = client.get(probe_path())

    assert response.status_code == 503 and response.json()["failing"] == ["schema"]
    assert response.json()["checks"]["database"]["status"] == "ok"
