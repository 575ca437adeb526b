"""GET /api/v1/jobs/{id}/logs/download/: one replica's whole log as text, streamed, with the job's access rules
(a team token of another team, like an outsider, gets 404), for CI and `gangway logs --all`."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduling.cluster.simulated import SimulatedCluster
from tests.api.conftest import PERSONAS
from tests.api.test_jobs_logs import READS, failed_job  # noqa: F401  (the fixture)


def download(job, **query) -> str:
    suffix = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/api/v1/jobs/{job.pk}/logs/download/" + (f"?{suffix}" if suffix else "")


def text(response) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_gives_the_log_only_to_who_may_see_the_job(as_persona, failed_job, persona):
    response = as_persona(persona).get(download(failed_job, replica="worker-0"))
    assert response.status_code == READS[persona]
    if response.status_code == 200:
        assert "replica worker-0 (1 of 2) started" in text(response).splitlines()[0]
    else:
        assert "replica worker-0" not in response.content.decode()  # nothing of the log, only why not


def test_it_is_the_replicas_whole_log_as_a_text_attachment(as_persona, failed_job):
    client = as_persona("maps_token")
    response = client.get(download(failed_job, replica="worker-1"))
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="probe-{failed_job.pk}-worker-1.log"'
    lines = client.get(f"/api/v1/jobs/{failed_job.pk}/logs/?replica=worker-1&tail=5000").json()["replicas"][0]["lines"]
    assert text(response) == "".join(line + "\n" for line in lines)


def test_a_job_of_several_replicas_needs_one_named_and_the_answer_names_them(as_persona, failed_job):
    response = as_persona("maps_token").get(download(failed_job))
    assert response.status_code == 400 and list(response.json()) == ["replica"]
    assert "has 2 replicas (worker-0, worker-1)" in response.json()["replica"][0]


def test_a_job_of_one_replica_needs_none_named(as_persona, submit, cycle):
    job = submit(name="solo", replicas=[{"role": "Worker", "count": 1, "gpu": 1}], simulate={"duration": 3600})
    cycle()
    response = as_persona("owner").get(download(job))
    assert response.status_code == 200 and "replica worker-0 (1 of 1) started" in text(response)


def test_a_replica_the_job_lacks_is_not_found_and_a_name_no_replica_has_is_refused(as_persona, failed_job):
    client = as_persona("owner")
    missing = client.get(download(failed_job, replica="worker-9"))
    assert missing.status_code == 404 and "no replica 'worker-9'" in missing.json()["detail"]
    odd = client.get(download(failed_job, replica="Worker_0"))
    assert odd.status_code == 400 and list(odd.json()) == ["replica"]


def test_a_job_that_never_ran_has_no_log(as_persona, submit):
    job = submit()
    response = as_persona("owner").get(download(job))
    assert response.status_code == 404 and "has no replicas with logs" in response.json()["detail"]


def test_an_unreachable_cluster_answers_503(as_persona, failed_job, monkeypatch):
    from scheduling.cluster.base import ClusterUnavailable

    def unreachable(*args, **kwargs):
        raise ClusterUnavailable("cannot reach the API server")

    monkeypatch.setattr(SimulatedCluster, "log_stream", unreachable)
    response = as_persona("owner").get(download(failed_job, replica="worker-0"))
    assert response.status_code == 503 and "cannot reach the API server" in response.json()["detail"]


def test_a_reader_asking_for_text_alone_gets_the_log_and_its_errors_as_text(as_persona, failed_job):
    client = as_persona("owner")
    response = client.get(download(failed_job, replica="worker-0"), HTTP_ACCEPT="text/plain")
    assert response.status_code == 200 and text(response) == text(client.get(download(failed_job, replica="worker-0")))
    missing = client.get(download(failed_job, replica="worker-9"), HTTP_ACCEPT="text/plain")
    assert missing.status_code == 404 and missing["Content-Type"].startswith("text/plain")
    assert "no replica 'worker-9'" in missing.content.decode()


def test_the_schema_documents_the_download(db):
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/v1/jobs/{id}/logs/download/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"id", "replica"}
    assert {"200", "400", "401", "404", "503"} <= set(operation["responses"])
    assert list(operation["responses"]["200"]["content"]) == ["text/plain"]
