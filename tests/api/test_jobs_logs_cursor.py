"""GET /api/v1/jobs/{id}/logs/?cursor=: reading on from an earlier answer, each line once, with the job's access
rules and a 400 naming the field for a cursor the endpoint did not give."""

from __future__ import annotations

import base64
import json
import zlib
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.logs import LOGS_CACHE
from tests.api.conftest import PERSONAS
from tests.api.test_jobs_logs import READS, failed_job, url  # noqa: F401  (the fixture)


def _packed(data: object) -> str:
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(data).encode())).decode().rstrip("=")


@pytest.fixture
def clock(monkeypatch):
    """The simulated cluster's time, which a test moves on; the API reads that cluster."""
    from scheduling import logs
    from scheduling.cluster.simulated import SimulatedCluster

    now = [timezone.now()]
    monkeypatch.setattr(logs, "get_cluster", lambda: SimulatedCluster(clock=lambda: now[0]))
    return now


@pytest.fixture
def running_job(submit, nodes, clock):
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.loop import admission_cycle

    job = submit(name="chatty", replicas=[{"role": "Worker", "count": 2, "gpu": 1}], simulate={"duration": 36000})
    admission_cycle(cluster=SimulatedCluster(clock=lambda: clock[0]))
    job.refresh_from_db()
    return job


@pytest.fixture
def runs_on(clock):
    def _runs_on(seconds: int) -> None:
        """The simulated job runs `seconds` more (a line every 10 s); the kept reads are forgotten."""
        clock[0] += timedelta(seconds=seconds)
        caches[LOGS_CACHE].clear()

    return _runs_on


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_reads_on_from_a_cursor_only_for_who_may_see_the_job(as_persona, failed_job, persona):
    cursor = as_persona("owner").get(url(failed_job)).json()["cursor"]
    assert as_persona(persona).get(url(failed_job, cursor=cursor)).status_code == READS[persona]


def test_an_outsider_gets_404_whatever_the_cursor(as_persona, failed_job):
    assert as_persona("outsider").get(url(failed_job, cursor="not-a-cursor")).status_code == 404


@pytest.mark.parametrize(
    "cursor",
    ["", "not a cursor", "%25", "eJw", _packed(["worker-0"]), _packed({"worker-0": ["yesterday", 1]}),
     _packed({"worker-0": ["2024-05-01T10:00:00.000000000Z", -1]}), _packed({"Worker 0": ["", 0]}), "A" * 5000],
    ids=["empty", "spaces", "a percent sign", "cut short", "not a mapping", "not a time", "a negative count",
         "not a replica's name", "too long"],
)  # fmt: skip
def test_it_refuses_a_cursor_it_did_not_give_naming_the_field(as_persona, failed_job, cursor):
    response = as_persona("owner").get(f"/api/v1/jobs/{failed_job.pk}/logs/", {"cursor": cursor})
    assert response.status_code == 400 and list(response.json()) == ["cursor"]


def test_every_answer_has_a_cursor_and_each_lines_time(as_persona, running_job):
    body = as_persona("owner").get(url(running_job, tail=3)).json()
    assert body["cursor"] and all(len(r["times"]) == len(r["lines"]) for r in body["replicas"])
    assert {"cursor", "job", "state", "failure", "replicas"} == set(body)


def test_reading_on_gives_only_the_lines_written_since_and_counts_those_left_out(as_persona, running_job, runs_on):
    client = as_persona("owner")
    runs_on(30)
    first = client.get(url(running_job, tail=3)).json()
    runs_on(100)  # ten more lines of each replica

    body = client.get(url(running_job, tail=4, cursor=first["cursor"])).json()
    whole = client.get(url(running_job, tail=200)).json()

    for replica, everything in zip(body["replicas"], whole["replicas"]):
        assert replica["skipped"] == 6 and replica["skipped_exact"]
        assert replica["lines"] == everything["lines"][-4:]
    again = client.get(url(running_job, tail=4, cursor=body["cursor"])).json()
    assert [r["lines"] for r in again["replicas"]] == [[], []] and again["cursor"] == body["cursor"]


def test_a_cursor_reads_on_for_the_replica_chosen(as_persona, running_job, runs_on):
    client = as_persona("owner")
    first = client.get(url(running_job, replica="worker-1", tail=1)).json()
    runs_on(20)
    body = client.get(url(running_job, replica="worker-1", cursor=first["cursor"])).json()
    assert [r["replica"] for r in body["replicas"]] == ["worker-1"] and len(body["replicas"][0]["lines"]) == 2


def test_the_schema_documents_the_cursor(db):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/v1/jobs/{id}/logs/"]["get"]
    (cursor,) = [p for p in operation["parameters"] if p["name"] == "cursor"]
    assert cursor["in"] == "query" and cursor["schema"]["pattern"] and "cursor" in operation["description"]
    answer = schema["components"]["schemas"]["JobLogs"]["properties"]
    replica = schema["components"]["schemas"]["ReplicaLog"]["properties"]
    assert "cursor" in answer and {"times", "skipped", "skipped_exact"} <= set(replica)
