"""My jobs: the signed-in user's jobs across teams, filtered by state."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_it_requires_login(client):
    assert client.get("/jobs/").status_code == 302


def test_it_lists_my_jobs_only(login, owner, member, submit):
    submit(name="mine")
    submit(name="theirs", user=member)
    body = login(owner).get("/jobs/").content.decode()
    assert "mine" in body
    assert "theirs" not in body


def test_it_hides_other_teams_jobs(login, outsider, submit, vision):
    submit(name="maps-job")
    submit(name="vision-job", team=vision, user=outsider)
    body = login(outsider).get("/jobs/").content.decode()
    assert "vision-job" in body
    assert "maps-job" not in body


def test_it_filters_by_state(login, owner, submit, htmx):
    submit(name="keep-waiting")
    gone = submit(name="gone")
    client = login(owner)
    client.post(f"/jobs/{gone.pk}/cancel/")
    waiting = client.get("/jobs/?state=waiting").content.decode()
    assert "keep-waiting" in waiting and ">gone<" not in waiting
    ended = client.get("/jobs/?state=cancelled", **htmx).content.decode()
    assert ">gone<" in ended and "keep-waiting" not in ended
    assert "<html" not in ended


def test_it_says_what_to_do_with_no_jobs(login, owner):
    assert "No jobs yet" in login(owner).get("/jobs/").content.decode()


def test_queries_do_not_grow_with_the_jobs_shown(login, owner, submit, django_assert_max_num_queries):
    client = login(owner)
    submit(name="one")
    with django_assert_max_num_queries(8):
        client.get("/jobs/")
    for index in range(30):
        submit(name=f"more-{index}")
    with django_assert_max_num_queries(8):
        client.get("/jobs/")


def test_its_rows_and_the_job_page_round_ages_one_way(login, owner, submit):
    """A job submitted and started 160 s ago reads "3 min ago" beside "running 3 min", where the submitted time
    read "2 minutes ago" (rounded down) beside the running time rounded to the nearest minute."""
    job = submit(name="aged")
    then = timezone.now() - timedelta(seconds=160)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, submitted_at=then, started_at=then)
    client = login(owner)
    body = client.get("/jobs/").content.decode()
    row = body[body.rindex("<tr", 0, body.index(f'href="/jobs/{job.pk}/"')):]
    row = row[:row.index("</tr>")]
    assert ">3 min ago</time>" in row and "running 3 min" in row
    assert "minutes ago" not in row
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert ">3 min ago</time>" in page and "minutes ago" not in page
