"""POST /api/v1/jobs/{id}/cancel/: owners, leads, staff and the team's token; others 403 or 404."""

import pytest

from jobs.models import Job, Sweep
from jobs.transitions import transition
from tests.api.conftest import PERSONAS

CANCEL_STATUS = {
    "owner": 200, "member": 403, "lead": 200, "outsider": 404, "staff": 200,
    "maps_token": 200, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_cancels_for_those_allowed(as_persona, persona, submit):
    job = submit()
    response = as_persona(persona).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == CANCEL_STATUS[persona]
    job.refresh_from_db()
    assert job.state == ("cancelled" if CANCEL_STATUS[persona] == 200 else "queued")


def test_a_member_is_told_who_may_cancel(as_persona, submit):
    job = submit()
    detail = as_persona("member").post(f"/api/v1/jobs/{job.pk}/cancel/").json()["detail"]
    assert detail == f"Only the job's owner, a lead of team maps or an admin can cancel job {job.pk}."


def test_a_job_cancelled_while_it_waits_keeps_nothing_of_its_wait(as_persona, submit):
    job = submit()
    Job.objects.filter(pk=job.pk).update(
        position=2, eta="2030-01-02T03:00:00Z", reason="Waiting for quota: needs 8 GPUs.", reason_code="borrowing_limit",
        reservation={"start": "2030-01-02T03:04:05+00:00", "placement": {"node-01": 1}, "nodes": ["node-01"]})
    body = as_persona("owner").post(f"/api/v1/jobs/{job.pk}/cancel/").json()
    assert (body["state"], body["position"], body["eta"], body["reservation"], body["reason_code"]) == (
        "cancelled", None, None, None, "")
    assert body["reason"] == "Cancelled before it was admitted; nothing ran."


def test_a_running_job_goes_to_cancelling(as_persona, submit):
    job = submit()
    transition(job, Job.State.ADMITTED, message="test")
    response = as_persona("owner").post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "cancelling"


def test_cancelling_twice_changes_nothing(as_persona, submit):
    job = submit()
    client = as_persona("owner")
    client.post(f"/api/v1/jobs/{job.pk}/cancel/")
    again = client.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert again.status_code == 200 and again.json()["state"] == "cancelled"
    assert job.events.filter(kind="cancelled").count() == 1


def test_a_finished_job_cannot_be_cancelled(as_persona, submit):
    job = submit()
    transition(job, Job.State.ADMITTED, message="test")
    transition(job, Job.State.SUCCEEDED, message="test")
    response = as_persona("owner").post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 409 and "already ended (succeeded)" in response.json()["detail"]


@pytest.mark.parametrize("persona", ["lead", "staff", "maps_token"])
def test_a_trial_of_a_katib_sweep_is_not_cancelled_and_the_answer_says_how_to_stop_it(as_persona, persona, submit,
                                                                                      maps):
    job = submit(name="tune-lr-t000")
    sweep = Sweep.objects.create(team=maps, experiment="tune-lr")
    Job.objects.filter(pk=job.pk).update(sweep=sweep, cluster_name="tune-lr-t000", cluster_uid="5d1e-trial")

    response = as_persona(persona).post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"tune-lr-t000 (#{job.pk}) is trial tune-lr-t000 of Katib experiment tune-lr, and Katib stops its trials: "
        "delete the trial in Katib (kubectl delete trial tune-lr-t000 -n maps) and Gangway ends this job once its "
        "trial is gone."
    )
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and not job.events.filter(kind="cancel_requested").exists()
    assert as_persona("outsider").post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 404
