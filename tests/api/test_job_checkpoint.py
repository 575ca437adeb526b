"""POST /api/v1/jobs/{id}/checkpoint/: a job whose pods may run (admitted, running, preempting) reports a
checkpoint with its own scoped token."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

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


@pytest.mark.parametrize("state", ["admitted", "running", "preempting"])
def test_a_job_whose_pods_may_run_records_the_checkpoint(client, submit, state):
    job = submit()
    Job.objects.filter(pk=job.pk).update(state=state)
    response = post(client, job.pk, job_tokens.issue(job.pk))
    assert response.status_code == 200, response.content
    assert Job.objects.get(pk=job.pk).checkpointed_at is not None


@pytest.mark.parametrize("state", ["queued", "cancelling", "succeeded", "failed", "cancelled", "rejected"])
def test_a_job_whose_pods_do_not_run_answers_409_naming_the_states_that_report(client, submit, state):
    job = submit()
    Job.objects.filter(pk=job.pk).update(state=state)
    response = post(client, job.pk, job_tokens.issue(job.pk))
    assert response.status_code == 409
    assert response.json()["detail"] == (f"Job {job.name} (#{job.pk}) is {state}; only an admitted, running or "
                                         "preempting job reports checkpoints.")
    assert Job.objects.get(pk=job.pk).checkpointed_at is None


def test_a_report_older_than_the_stored_checkpoint_leaves_it(running):
    """Reconcile records the moment a cluster says the pods saved, which may be older than a report made since."""
    from jobs.services import job_checkpoint

    later = timezone.now()
    job_checkpoint(job_id=running.pk, at=later)
    assert job_checkpoint(job_id=running.pk, at=later - timedelta(minutes=5)).checkpointed_at == later
    assert Job.objects.get(pk=running.pk).checkpointed_at == later


def test_a_checkpoint_saved_while_preempting_is_kept_but_the_next_run_counts_its_unsaved_work_from_its_start(
        client, submit, nodes):
    from scheduling.cluster.simulated import SimulatedCluster
    from scheduling.snapshot import build_world, epoch

    job = submit()
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state="preempting", admitted_at=now - timedelta(hours=3),
                                         started_at=now - timedelta(hours=3))  # fmt: skip
    assert post(client, job.pk, job_tokens.issue(job.pk)).status_code == 200
    saved = now - timedelta(hours=2)  # its grace period, two hours ago
    Job.objects.filter(pk=job.pk).update(checkpointed_at=saved)
    # Requeued, then admitted again an hour ago: this run resumed from that checkpoint and has saved nothing since.
    next_run = now - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=next_run, started_at=next_run)

    def carried():
        world = build_world(now=timezone.now(), nodes=SimulatedCluster().nodes(), outside=[])
        (running,) = world.snapshot.running
        return running.checkpointed

    assert carried() is None, "R8 counts this run's unsaved work from its start, not from the last run's save"
    assert Job.objects.get(pk=job.pk).checkpointed_at == saved, "the checkpoint itself is kept"
    Job.objects.filter(pk=job.pk).update(state="admitted", started_at=None)
    assert post(client, job.pk, job_tokens.issue(job.pk)).status_code == 200  # its pods run before reconcile sees it
    assert carried() == epoch(Job.objects.get(pk=job.pk).checkpointed_at), "a checkpoint of this run counts"


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
