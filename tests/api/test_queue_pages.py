"""GET /api/v1/queue/ read page by page while the queue moves: each `next` link starts its page right after the
last job shown, wherever that job stands now, so no waiting job is skipped between two pages."""

from __future__ import annotations

from jobs.models import Job
from jobs.services import job_cancel
from tests.pages.conftest import fill_and_wait  # noqa: F401 (fixture)


def test_jobs_leaving_the_queue_ahead_make_no_job_skip_a_page(as_persona, owner, fill_and_wait, cycle):
    waiting = fill_and_wait(30)
    client = as_persona("owner")
    first = client.get("/api/v1/queue/?page_size=10").json()
    assert [job["id"] for job in first["results"]] == [job.pk for job in waiting[:10]]
    for job in waiting[:3]:  # leave the queue from the first page (an admission does the same)
        job_cancel(job=job, actor=owner)
    cycle()
    second = client.get(first["next"]).json()
    assert [job["id"] for job in second["results"]] == [job.pk for job in waiting[10:20]]
    assert second["count"] == 27 and "after=" in second["next"]


def test_a_page_after_a_job_that_left_the_queue_starts_where_it_stood(as_persona, owner, fill_and_wait):
    waiting = fill_and_wait(12)
    client = as_persona("owner")
    first = client.get("/api/v1/queue/?page_size=5").json()
    job_cancel(job=waiting[4], actor=owner)  # the last job of the first page
    second = client.get(first["next"]).json()
    assert [job["id"] for job in second["results"]] == [job.pk for job in waiting[5:10]]


def test_every_page_by_next_links_shows_the_queue_once(as_persona, fill_and_wait):
    waiting = fill_and_wait(12)
    client, seen, path = as_persona("owner"), [], "/api/v1/queue/?page_size=5"
    while path:
        body = client.get(path).json()
        seen += [job["id"] for job in body["results"]]
        path = body["next"]
    assert seen == [job.pk for job in waiting]
    assert client.get("/api/v1/queue/?page_size=5&page=3").json()["results"][0]["id"] == waiting[10].pk  # by number


def test_a_cursor_that_is_not_a_job_id_is_refused(as_persona):
    response = as_persona("owner").get("/api/v1/queue/?after=x&at=-1")
    assert response.status_code == 400 and {"after", "at"} <= set(response.json())


def test_a_page_after_a_job_that_moved_to_the_end_starts_where_it_stood(as_persona, fill_and_wait):
    waiting = fill_and_wait(12)
    client = as_persona("owner")
    first = client.get("/api/v1/queue/?page_size=5").json()
    Job.objects.filter(pk=waiting[4].pk).update(position=None)  # held out of the plan: last of the queue now
    second = client.get(first["next"]).json()
    assert [job["id"] for job in second["results"]] == [job.pk for job in waiting[5:10]]  # none skipped
