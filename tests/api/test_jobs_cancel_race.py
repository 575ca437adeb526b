"""A cancel that meets another change of the job (real PostgreSQL, two connections): the answer says what the
job became under the cancel's row lock, never what it was when the request read it."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import transaction

from jobs.models import Job
from jobs.transitions import transition
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_that_succeeds_while_the_cancel_waits_answers_409_and_stays_succeeded(as_persona, submit):
    job = submit()
    transition(job, Job.State.ADMITTED, message="test")
    transition(job, Job.State.RUNNING, message="test")
    client = as_persona("owner")
    moved = threading.Event()
    answers = []

    def finish() -> None:  # reconcile reads the cluster: the job succeeded; it commits a moment later
        with transaction.atomic():
            transition(Job.objects.get(pk=job.pk), Job.State.SUCCEEDED, message="Succeeded.")
            moved.set()
            time.sleep(0.5)

    def cancel() -> None:  # reads the job running (the success is not committed), then waits on its row
        assert moved.wait(timeout=10)
        answers.append(client.post(f"/api/v1/jobs/{job.pk}/cancel/"))

    assert run_together(finish, cancel, timeout=30) == []
    assert answers[0].status_code == 409, answers[0].json()
    assert "already ended (succeeded)" in answers[0].json()["detail"]
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED and not job.events.filter(kind="cancel_requested").exists()


def test_two_cancels_at_once_cancel_once(as_persona, submit):
    job = submit()
    answers = []

    def cancel() -> None:
        answers.append(as_persona("owner").post(f"/api/v1/jobs/{job.pk}/cancel/"))

    assert run_together(cancel, cancel, timeout=30) == []
    assert [answer.status_code for answer in answers] == [200, 200]
    assert {answer.json()["state"] for answer in answers} == {"cancelled"}
    assert job.events.filter(kind="cancel_requested").count() == 1
    assert job.events.filter(kind="cancelled").count() == 1
