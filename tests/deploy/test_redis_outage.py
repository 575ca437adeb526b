"""A Redis that refuses or never answers: /metrics still answers, /readyz names the broker within the probe's
timeout, and a change that asks the loop for work never waits on the broker for more than a few seconds."""

from __future__ import annotations

import threading
import time

import pytest
from celery import Celery
from django.core.cache import cache
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from portal import settings as configured, triggers
from tests.outages import refused_redis, silent_redis

pytestmark = pytest.mark.django_db


def test_metrics_answer_without_the_task_failure_counts_while_redis_is_down(client, caplog):
    assert configured._REDIS_URL, "the suite runs with Redis"
    caches = {**configured.CACHES, "metrics": {**configured.CACHES["metrics"], "LOCATION": refused_redis()}}
    with override_settings(CACHES=caches):
        response = client.get("/metrics")

    assert response.status_code == 200
    families = {family.name: family for family in text_string_to_metric_families(response.content.decode())}
    assert "gangway_queue_length" in families
    assert families["gangway_tasks_failed"].samples == []  # unknown, not zero: a counter never seems to reset
    assert "cannot be reached" in caplog.text


def test_readyz_names_a_broker_that_never_answers_within_the_probes_timeout(client):
    with silent_redis() as url, override_settings(CELERY_BROKER_URL=url):
        started = time.monotonic()
        response = client.get("/readyz")
        took = time.monotonic() - started

    assert response.status_code == 503 and response.json()["failing"] == ["broker"]
    assert took < 5, f"/readyz took {took:.1f} s; the probe gives up after 5 s"


def test_asking_for_a_cycle_gives_up_on_a_broker_that_never_answers(monkeypatch, caplog):
    """A submission asks for a cycle once it commits, in the web request: a silent broker must not hold it."""
    returned = threading.Event()
    with silent_redis() as url:
        app = Celery("gangway-probe", set_as_current=False)  # the suite's app stays the current one
        app.config_from_object("django.conf:settings", namespace="CELERY")
        monkeypatch.setenv("CELERY_BROKER_URL", url)  # Celery reads the broker from the environment first
        assert app.connection_for_write().as_uri().endswith(url.rsplit(":", 1)[1])
        monkeypatch.setattr(triggers, "current_app", app)
        cache.delete(f"gangway:trigger:{triggers.ADMISSION_CYCLE}")
        thread = threading.Thread(target=lambda: (triggers.trigger(triggers.ADMISSION_CYCLE), returned.set()),
                                  daemon=True)  # fmt: skip
        thread.start()
        thread.join(20)
        assert returned.is_set(), "still waiting on the broker after 20 s"
        app.close()
    assert "could not enqueue gangway.admission_cycle" in caplog.text
