"""GET /api/v1/jobs/{id}/logs/: each replica's recent lines and the failing replica, with the job's access rules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import SimJob
from scheduling.reconcile import reconcile
from tests.api.conftest import PERSONAS

READS = {
    "owner": 200, "member": 200, "lead": 200, "outsider": 404, "staff": 200,
    "maps_token": 200, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.fixture
def failed_job(submit, nodes):
    job = submit(name="probe", replicas=[{"role": "Worker", "count": 2, "gpu": 1}],
                 simulate={"duration": 30, "fail": True})  # fmt: skip
    admission_cycle(cluster=SimulatedCluster())
    sim = SimJob.objects.get(job_id=job.pk)
    SimJob.objects.filter(pk=sim.pk).update(started_at=sim.started_at - timedelta(seconds=120))
    reconcile(cluster=SimulatedCluster())
    job.refresh_from_db()
    return job


def url(job, **query) -> str:
    suffix = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/api/v1/jobs/{job.pk}/logs/" + (f"?{suffix}" if suffix else "")


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_shows_logs_only_to_who_may_see_the_job(as_persona, failed_job, persona):
    assert as_persona(persona).get(url(failed_job)).status_code == READS[persona]


def test_it_answers_each_replicas_lines_and_the_failing_replica(as_persona, failed_job):
    body = as_persona("owner").get(url(failed_job, tail=5)).json()
    assert body["job"] == failed_job.pk and body["state"] == "failed"
    assert [r["replica"] for r in body["replicas"]] == ["worker-0", "worker-1"]
    assert all(len(r["lines"]) == 5 for r in body["replicas"])
    failure = body["failure"]
    assert failure["exit_code"] == 1 and failure["reason"] == "Error" and failure["explanation"]
    assert failure["lines"][-1] == failure["message"]


def test_it_narrows_to_one_replica_and_refuses_an_unknown_one(as_persona, failed_job):
    client = as_persona("owner")
    assert [r["replica"] for r in client.get(url(failed_job, replica="worker-1")).json()["replicas"]] == ["worker-1"]
    missing = client.get(url(failed_job, replica="worker-9"))
    assert missing.status_code == 404 and "no replica 'worker-9'" in missing.json()["detail"]


@pytest.mark.parametrize("tail", ["0", "5001", "ten", "-1"])
def test_it_refuses_a_bad_tail(as_persona, failed_job, tail):
    response = as_persona("owner").get(url(failed_job, tail=tail))
    assert response.status_code == 400 and "tail" in response.json()


def test_a_job_that_never_ran_has_no_replicas(as_persona, submit):
    job = submit()
    body = as_persona("owner").get(url(job)).json()
    assert body.pop("cursor")  # where a follower reads on from (tests/api/test_jobs_logs_cursor.py)
    assert body == {"job": job.pk, "state": "queued", "failure": None, "replicas": []}


def test_an_unreachable_cluster_answers_503(as_persona, failed_job, monkeypatch):
    from scheduling.cluster.base import ClusterUnavailable

    def unreachable(*args, **kwargs):
        raise ClusterUnavailable("cannot reach the API server")

    monkeypatch.setattr(SimulatedCluster, "logs", unreachable)
    response = as_persona("owner").get(url(failed_job))
    assert response.status_code == 503 and "cannot reach the API server" in response.json()["detail"]


def test_the_schema_documents_the_logs_endpoint(db):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/v1/jobs/{id}/logs/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"id", "replica", "tail"}
    assert {"200", "404", "503"} <= set(operation["responses"])
