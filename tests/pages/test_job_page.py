"""The job page, its polled `live` fragment, and cancel."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.services import job_cancel
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.reconcile import reconcile

pytestmark = pytest.mark.django_db

SEES = {"owner": 200, "member": 200, "lead": 200, "outsider": 404, "staff": 200}
CANCELS = {"owner": 302, "member": 403, "lead": 302, "outsider": 404, "staff": 302}


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_page(request, login, submit, persona, status):
    job = submit()
    assert login(request.getfixturevalue(persona)).get(f"/jobs/{job.pk}/").status_code == status


@pytest.mark.parametrize("persona, status", SEES.items())
def test_access_to_the_live_fragment(request, login, submit, htmx, persona, status):
    job = submit()
    assert login(request.getfixturevalue(persona)).get(f"/jobs/{job.pk}/", **htmx).status_code == status


def test_it_requires_login(client, submit):
    job = submit()
    assert client.get(f"/jobs/{job.pk}/").status_code == 302


def test_a_missing_job_answers_404_in_the_sites_style(login, owner):
    response = login(owner).get("/jobs/999999/")
    assert response.status_code == 404
    assert b"Nothing here" in response.content


def test_it_shows_why_a_job_waits(login, owner, fill_and_wait):
    (job,) = fill_and_wait(1)
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Why it waits" in body
    assert job.reason in body
    assert 'class="tile-value num">1</span>' in body  # position 1
    assert 'hx-trigger="every 3s"' in body


def test_it_shows_replicas_on_their_nodes_and_the_manifest(login, owner, submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 2, "gpu": 1}])
    cycle()
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Worker-0" in body and "Worker-1" in body
    assert "<code>node-01</code>" in body
    assert "kind: TFJob" in body
    assert "schedulerName: volcano" in body


def test_a_job_cancelled_while_it_ran_shows_the_nodes_it_ran_on(login, owner, submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 2, "gpu": 1}])
    cycle()  # admitted
    cluster = SimulatedCluster(failure_rate=0)
    reconcile(cluster=cluster)  # its pods run
    job_cancel(job=Job.objects.get(pk=job.pk), actor=owner)
    reconcile(cluster=cluster)  # its pods stopped
    assert Job.objects.get(pk=job.pk).state == Job.State.CANCELLED
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "2 replicas placed; it has ended" in body and body.count("<code>node-01</code>") == 2
    assert "its nodes were not recorded" not in body


def test_it_shows_the_timeline_of_events(login, owner, submit, cycle):
    job = submit()
    cycle()
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Submitted by owner" in body
    assert "Admitted: all 2 replicas placed at once" in body


def test_a_job_of_one_replica_reads_as_one(login, owner, submit, cycle):
    job = submit(replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    cycle()  # admitted
    reconcile(cluster=SimulatedCluster(failure_rate=0))  # its pod runs
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Admitted: its replica placed (1 on node-01)" in body
    assert "Running: its replica started." in body
    assert "all 1 replicas" not in body


def test_the_fragment_polls_while_the_job_lives(login, owner, submit, htmx):
    job = submit()
    response = login(owner).get(f"/jobs/{job.pk}/", **htmx)
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b'hx-trigger="every 3s"' in response.content
    assert "HX-Request" in response["Vary"]


def test_the_fragment_stops_polling_once_the_job_has_ended(login, owner, submit, htmx):
    job = submit()
    login(owner).post(f"/jobs/{job.pk}/cancel/")
    response = login(owner).get(f"/jobs/{job.pk}/", **htmx)
    assert response.status_code == 286
    assert b"hx-trigger" not in response.content
    assert b"Cancelled" in response.content


@pytest.mark.parametrize("persona, status", CANCELS.items())
def test_who_may_cancel(request, login, submit, persona, status):
    job = submit()
    response = login(request.getfixturevalue(persona)).post(f"/jobs/{job.pk}/cancel/")
    assert response.status_code == status
    job.refresh_from_db()
    assert (job.state == Job.State.CANCELLED) == (status == 302)


def test_only_those_who_may_cancel_see_the_button(login, submit, member, lead):
    job = submit()
    assert b"Cancel job" not in login(member).get(f"/jobs/{job.pk}/").content
    assert b"Cancel job" in login(lead).get(f"/jobs/{job.pk}/").content


def test_cancel_by_htmx_redirects_to_the_job(login, owner, submit, htmx):
    job = submit()
    response = login(owner).post(f"/jobs/{job.pk}/cancel/", **htmx)
    assert response["HX-Redirect"] == f"/jobs/{job.pk}/"


def test_cancelling_twice_says_the_job_was_already_cancelled(login, owner, submit):
    job = submit()
    client = login(owner)
    first = client.post(f"/jobs/{job.pk}/cancel/", follow=True).content.decode()
    second = client.post(f"/jobs/{job.pk}/cancel/", follow=True).content.decode()  # from a second tab
    assert f"Cancelled resnet (#{job.pk}) before it was admitted; nothing ran." in first
    assert f"resnet (#{job.pk}) was already cancelled." in second and "Cancel requested for" not in second


def test_the_command_reads_as_typed_with_its_quoting(login, owner, submit):
    job = submit(command=["python", "train.py"], args=["--note", "a b", "--x=it's"])
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "<code>python train.py --note &#x27;a b&#x27; &#x27;--x=it&#x27;&quot;&#x27;&quot;&#x27;s&#x27;</code>" in body


def test_cancel_needs_a_post(login, owner, submit):
    job = submit()
    assert login(owner).get(f"/jobs/{job.pk}/cancel/").status_code == 405


def test_cancel_needs_the_csrf_token(csrf_client, owner, submit):
    job = submit()
    csrf_client.force_login(owner)
    assert csrf_client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED


def test_pages_carry_the_csrf_header_for_htmx(login, owner, submit):
    job = submit()
    assert b'hx-headers=\'{"X-CSRFToken": "' in login(owner).get(f"/jobs/{job.pk}/").content


def test_queries_do_not_grow_with_the_events(login, owner, submit, cycle, django_assert_max_num_queries):
    job = submit()
    cycle()
    client = login(owner)
    with django_assert_max_num_queries(12):
        client.get(f"/jobs/{job.pk}/")
    _notes(job, 80)  # past the timeline's latest, which then counts the rest
    with django_assert_max_num_queries(12):
        client.get(f"/jobs/{job.pk}/")


def test_a_preempted_job_back_in_the_queue_reads_preempted_requeued(client, owner, submit):
    from jobs.models import Job

    job = submit()
    Job.objects.filter(pk=job.pk).update(preemption_count=1)
    client.force_login(owner)
    assert "Preempted, requeued" in client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Preempted, requeued" in client.get("/jobs/").content.decode()


@pytest.mark.parametrize(("reported", "says"), [
    (None, "No checkpoint reported yet"),
    (+60, "ago: if it is preempted, it loses only the work since then."),
    (-60, "ago, in an earlier run, which this one resumed from; none reported since it started."),
], ids=["none", "in this run", "in an earlier run"])
def test_the_page_of_a_running_job_says_what_its_last_checkpoint_saves(login, owner, submit, reported, says):
    from datetime import timedelta

    from django.utils import timezone

    job = submit()
    admitted = timezone.now() - timedelta(minutes=10)
    checkpointed = admitted + timedelta(seconds=reported) if reported is not None else None
    Job.objects.filter(pk=job.pk).update(state="running", admitted_at=admitted, started_at=admitted,
                                         checkpointed_at=checkpointed)
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert says in body


def test_a_reserving_jobs_page_names_its_room_once_and_no_second_time(login, owner, submit):
    job = submit(replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    Job.objects.filter(pk=job.pk).update(reservation={"start": "2030-01-02T03:04:05+00:00",
                                                      "placement": {"node-01": 1, "node-02": 1}})
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "Its reserved room: 1 replica on <code>node-01</code>, 1 replica on <code>node-02</code>." in body
    assert "Reserved from" not in body  # its start is the estimated start, said once


def test_the_page_says_how_long_a_job_is_expected_to_run_and_why(login, owner, submit, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.DEFAULT_RUNTIME = 86400
    page = lambda job: login(owner).get(f"/jobs/{job.pk}/").content.decode()  # noqa: E731
    bounded = submit(name="bounded", max_runtime=7200)
    assert "Expected to run 2 h: its max runtime, which also stops it then." in page(bounded)
    waiting = submit(name="waiting")
    assert ("Expected to run 24 h, the default runtime: it has no max runtime, and team maps has no successful "
            "TFJob of 2 GPUs to learn from (2 are needed).") in page(waiting)
    now = timezone.now()
    for minutes in (10, 20, 60):  # three successes of the same kind and size: their median is 20 min
        done = submit(name="done")
        Job.objects.filter(pk=done.pk).update(state="succeeded", started_at=now - timedelta(minutes=minutes),
                                              finished_at=now)
    assert "Expected to run about 20 min: the median of the latest 3 successful TFJobs of 2 GPUs in team maps." in page(
        waiting)
    assert "only a max runtime stops a job" in page(waiting)
    settings.DEFAULT_RUNTIME = 600
    assert "Expected to run about 10 min: the median of the latest 3 successful TFJobs of 2 GPUs in team maps, " \
           "capped at the default runtime." in page(waiting)


def _notes(job, count: int) -> None:
    from jobs.models import JobEvent

    JobEvent.objects.bulk_create([JobEvent(job=job, kind="note", message=f"Note {n}.") for n in range(count)])


def test_a_long_timeline_shows_its_latest_events_and_a_link_to_the_rest(login, owner, submit):
    from jobs.selectors import TIMELINE_LATEST

    job = submit()  # its submitted event, then the notes
    _notes(job, TIMELINE_LATEST + 9)
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert f"{TIMELINE_LATEST + 10} events" in body
    assert f"Note {TIMELINE_LATEST + 8}." in body and "Note 9." in body  # the latest, oldest of them first
    assert body.index("Note 9.") < body.index(f"Note {TIMELINE_LATEST + 8}.")
    assert "Note 8." not in body and "Submitted by owner" not in body
    assert "10 earlier events not shown here." in body
    assert 'href="?timeline=all#timeline-h"' in body


def test_the_whole_timeline_on_asking_and_its_poll_keeps_it_whole(login, owner, submit, htmx):
    from jobs.selectors import TIMELINE_LATEST

    job = submit()
    _notes(job, TIMELINE_LATEST + 9)
    client = login(owner)
    body = client.get(f"/jobs/{job.pk}/?timeline=all").content.decode()
    assert "Submitted by owner" in body and "Note 0." in body and f"Note {TIMELINE_LATEST + 8}." in body
    assert "earlier events not shown" not in body
    assert f'hx-get="/jobs/{job.pk}/?timeline=all"' in body
    assert f"show the latest {TIMELINE_LATEST} only" in body
    polled = client.get(f"/jobs/{job.pk}/?timeline=all", **htmx)
    assert "Note 0." in polled.content.decode()
    # The fragment of the latest events is another version: a poll holding it is answered in full.
    latest = client.get(f"/jobs/{job.pk}/", **htmx)
    held = client.get(f"/jobs/{job.pk}/?timeline=all", HTTP_IF_NONE_MATCH=latest["ETag"], **htmx)
    assert held.status_code == 200 and "Note 0." in held.content.decode()


def test_a_short_timeline_shows_every_event_without_a_link(login, owner, submit, cycle):
    job = submit()
    cycle()
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "earlier event" not in body and "?timeline=all" not in body


def test_a_rejected_job_says_why_from_the_event_that_ended_it_among_many(login, owner, submit):
    from jobs.selectors import TIMELINE_LATEST

    job = submit()
    Job.objects.filter(pk=job.pk).update(state=Job.State.REJECTED, reason="")
    job.events.create(kind="rejected", message="It asks for 99 GPUs; the cluster has 16.")
    _notes(job, TIMELINE_LATEST + 5)  # the rejection is no longer among the latest shown
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "It asks for 99 GPUs; the cluster has 16." in body


def test_an_adopted_jobs_page_shows_no_manifest_of_gangways_own(login, lead, submit):
    job = submit(name="from-kubectl")
    Job.objects.filter(pk=job.pk).update(cluster_name="bert-kubectl", cluster_uid="0b7c2f6e-kubectl",
                                         submitted_via="kubectl-create (alice)")  # fmt: skip
    body = login(lead).get(f"/jobs/{job.pk}/").content.decode()
    assert "Gangway creates in namespace" not in body and "schedulerName" not in body
    assert "<code>maps/bert-kubectl</code> is its owner's, as they wrote it: Gangway creates no object for it." in body
    assert "kubectl get tfjob bert-kubectl -n maps -o yaml" in body
