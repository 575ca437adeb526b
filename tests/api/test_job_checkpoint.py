"""POST /api/v1/jobs/{id}/checkpoint/: a running job reports a checkpoint with its own scoped token."""

from __future__ import annotations

import pytest
from django.test import override_settings

from jobs import job_tokens
from jobs.models import Job
from tenants.tokens import token_create


@pytest.fixture
def running(submit):
    job = submit()
    Job.objects.filter(pk=job.pk).update(state="running")
    return job


def post(client, job_id, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(f"/api/v1/jobs/{job_id}/checkpoint/", headers=headers)


def test_its_own_token_records_the_checkpoint(client, running):
    response = post(client, running.pk, job_tokens.issue(running.pk))
    assert response.status_code == 200, response.content
    running.refresh_from_db()
    assert running.checkpointed_at is not None and response.json()["job"] == running.pk


def test_another_jobs_token_is_refused(client, running, submit):
    other = submit(name="other")
    response = post(client, running.pk, job_tokens.issue(other.pk))
    assert response.status_code == 403 and "not for reporting" in response.json()["detail"]
    assert Job.objects.get(pk=running.pk).checkpointed_at is None


def test_a_tampered_token_is_refused(client, running):
    token = job_tokens.issue(running.pk)
    forged = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    assert post(client, running.pk, forged).status_code == 403


def test_an_expired_token_is_refused(client, running, monkeypatch):
    token = job_tokens.issue(running.pk)
    with override_settings(JOB_TOKEN_MAX_AGE=60):
        import time

        later = time.time() + 61
        monkeypatch.setattr("django.core.signing.time.time", lambda: later)
        response = post(client, running.pk, token)
    assert response.status_code == 403 and "expired" in response.json()["detail"]


def test_no_token_or_an_api_token_is_refused(client, running, maps):
    assert post(client, running.pk, "").status_code == 401
    api_token = token_create(name="ci", team=maps)[1]
    assert post(client, running.pk, api_token).status_code == 401


def test_a_job_token_opens_no_other_endpoint(client, running):
    token = job_tokens.issue(running.pk)
    headers = {"Authorization": f"Bearer {token}"}
    for path in (f"/api/v1/jobs/{running.pk}/", "/api/v1/jobs/", "/api/v1/queue/", f"/api/v1/jobs/{running.pk}/events/"):
        assert client.get(path, headers=headers).status_code == 401, path
    assert client.post(f"/api/v1/jobs/{running.pk}/cancel/", headers=headers).status_code == 401


def test_a_job_that_is_not_running_answers_409(client, submit):
    queued = submit()
    response = post(client, queued.pk, job_tokens.issue(queued.pk))
    assert response.status_code == 409 and "queued" in response.json()["detail"]


def test_pods_get_the_url_and_token_only_when_the_portal_address_is_known(running):
    from scheduling.cluster.manifests import training_job
    from scheduling.snapshot import to_cluster_job

    def env(job):
        spec = training_job(to_cluster_job(job))["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
        return {item["name"]: item["value"] for item in spec["containers"][0]["env"]}

    assert "GANGWAY_JOB_TOKEN" not in env(running)
    with override_settings(PUBLIC_URL="https://gangway.example.com"):
        values = env(running)
    assert values["GANGWAY_URL"] == "https://gangway.example.com"
    job_tokens.verify(values["GANGWAY_JOB_TOKEN"], running.pk)
