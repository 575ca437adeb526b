"""A Katib trial's page offers only what makes sense for a job Katib owns, and the server refuses the rest.

Katib creates a sweep's trials and stops them: a trial cancelled here would leave its Trial waiting on a
suspended job for good, and a copy resubmitted here would run outside its experiment. Kubeflow Pipelines
creates its runs' steps: a copy of one would run outside its run, so a step's page offers no resubmit
either. A job adopted from kubectl keeps both: Gangway suspends what it cancels, and a copy is a Gangway
job of its own.
"""

from __future__ import annotations

import pytest

from jobs.models import Job, JobEvent

pytestmark = pytest.mark.django_db

CANCEL_BUTTON = ">Cancel job</button>"
RESUBMIT = "Resubmit as new"


def first_trial(sweep, state=Job.State.ADMITTED) -> Job:
    return Job.objects.filter(sweep=sweep, state=state).order_by("id").first()


def test_an_open_trials_page_offers_neither_cancel_nor_resubmit_and_says_how_to_stop_it(login, lead, sweep):
    trial = first_trial(sweep)

    body = login(lead).get(f"/jobs/{trial.pk}/").content.decode()

    assert CANCEL_BUTTON not in body and RESUBMIT not in body and f"/jobs/{trial.pk}/cancel/" not in body
    assert "no cancel (Katib would wait on a stopped trial for good) and no resubmit" in body
    assert f"delete trial <code>{trial.cluster_name}</code> in Katib" in body


def test_an_ended_trials_page_explains_only_the_missing_resubmit(login, lead, sweep):
    trial = first_trial(sweep)
    Job.objects.filter(pk=trial.pk).update(state=Job.State.SUCCEEDED)

    body = login(lead).get(f"/jobs/{trial.pk}/").content.decode()

    assert RESUBMIT not in body and CANCEL_BUTTON not in body
    assert "offers no resubmit: a copy would run outside the experiment." in body and "delete trial" not in body


def test_a_trial_already_stopping_is_not_said_to_need_a_delete_in_katib(login, lead, sweep):
    trial = first_trial(sweep)
    Job.objects.filter(pk=trial.pk).update(state=Job.State.CANCELLING)  # its trial was deleted in Katib

    body = login(lead).get(f"/jobs/{trial.pk}/").content.decode()

    assert CANCEL_BUTTON not in body and RESUBMIT not in body
    assert "this one is stopping." in body and "delete trial" not in body


def test_a_job_adopted_from_kubectl_keeps_cancel_and_resubmit(login, lead, submit):
    job = submit(name="from-kubectl")
    Job.objects.filter(pk=job.pk).update(cluster_name="from-kubectl", cluster_uid="0b7c2f6e-kubectl",
                                         submitted_via="kubectl-create (alice)")  # fmt: skip

    body = login(lead).get(f"/jobs/{job.pk}/").content.decode()

    assert CANCEL_BUTTON in body and RESUBMIT in body and "Katib" not in body


def _pipelines_step(submit, name="nightly-step-001") -> Job:
    job = submit(name=name)
    Job.objects.filter(pk=job.pk).update(cluster_name=name, cluster_uid=f"5c1f-{name}",
                                         submitted_via="pipelines run nightly")  # fmt: skip
    return Job.objects.get(pk=job.pk)


def test_a_pipelines_steps_page_offers_no_resubmit_and_says_where_to_run_it_again(login, lead, submit):
    step = _pipelines_step(submit)

    body = login(lead).get(f"/jobs/{step.pk}/").content.decode()

    assert RESUBMIT not in body and f"/jobs/new/?from={step.pk}" not in body
    assert ("Kubeflow Pipelines run nightly created this step, so this page offers no resubmit: a copy would run "
            "outside the run. To run it again, retry the run in Pipelines.") in body
    assert CANCEL_BUTTON in body  # cancelling suspends it, as any adopted job


def test_resubmitting_a_pipelines_step_opens_an_empty_form_saying_why(login, lead, submit):
    step = _pipelines_step(submit)
    jobs = Job.objects.count()

    response = login(lead).get(f"/jobs/new/?from={step.pk}")

    body = response.content.decode()
    assert response.status_code == 200 and Job.objects.count() == jobs
    assert (f"nightly-step-001 (#{step.pk}) is a step of Kubeflow Pipelines run nightly, and Pipelines creates its "
            "steps: a copy submitted here would run outside the run") in body
    assert 'value="nightly-step-001"' not in body  # nothing of the step filled in


def test_a_job_not_adopted_is_copied_whatever_its_submitted_via_says(login, lead, submit):
    job = submit(name="plain-run")
    Job.objects.filter(pk=job.pk).update(submitted_via="pipelines run nightly")  # not adopted: no cluster object

    body = login(lead).get(f"/jobs/{job.pk}/").content.decode()

    assert RESUBMIT in body and "Kubeflow Pipelines run" not in body


@pytest.mark.parametrize("state", [Job.State.QUEUED, Job.State.ADMITTED])
def test_cancelling_a_trial_is_refused_saying_how_to_stop_it_and_changes_nothing(login, lead, sweep, state):
    trial = first_trial(sweep, state)
    events = JobEvent.objects.filter(job=trial).count()

    response = login(lead).post(f"/jobs/{trial.pk}/cancel/", follow=True)

    trial.refresh_from_db()
    assert trial.state == state and JobEvent.objects.filter(job=trial).count() == events
    assert response.redirect_chain == [(f"/jobs/{trial.pk}/", 302)]
    said = response.content.decode()
    assert f"is trial {trial.cluster_name} of Katib experiment tune-lr" in said
    assert f"kubectl delete trial {trial.cluster_name} -n maps" in said


def test_a_trial_cancelled_through_htmx_is_refused_too(login, lead, sweep, htmx):
    trial = first_trial(sweep)

    response = login(lead).post(f"/jobs/{trial.pk}/cancel/", **htmx)

    assert response["HX-Redirect"] == f"/jobs/{trial.pk}/"
    trial.refresh_from_db()
    assert trial.state == Job.State.ADMITTED


def test_a_plain_job_is_still_cancelled(login, lead, submit):
    job = submit(name="plain")

    login(lead).post(f"/jobs/{job.pk}/cancel/")

    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED


def test_an_outsider_cannot_cancel_or_copy_a_trial(login, outsider, sweep):
    trial = first_trial(sweep)
    client = login(outsider)

    assert client.post(f"/jobs/{trial.pk}/cancel/").status_code == 404
    assert client.get(f"/jobs/new/?from={trial.pk}").status_code == 404
    trial.refresh_from_db()
    assert trial.state == Job.State.ADMITTED


def test_resubmitting_a_trial_opens_an_empty_form_saying_why(login, lead, sweep):
    trial = first_trial(sweep)

    response = login(lead).get(f"/jobs/new/?from={trial.pk}")

    body = response.content.decode()
    assert response.status_code == 200
    assert f"is trial {trial.cluster_name} of Katib experiment tune-lr" in body
    assert "a copy submitted here would run outside the experiment" in body
    assert trial.image not in body and "--lr=" not in body  # nothing of the trial filled in


def test_resubmitting_a_plain_job_still_fills_the_form(login, lead, submit):
    job = submit(name="plain-copy")

    body = login(lead).get(f"/jobs/new/?from={job.pk}").content.decode()

    assert 'value="plain-copy"' in body and "Katib" not in body
