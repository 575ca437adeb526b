"""GET /api/v1/jobs/, /jobs/{id}/, /jobs/{id}/events/ and /queue/: scoped reads, filters, ordering, pages."""

import pytest

from jobs.models import Job
from tests.api.conftest import PERSONAS

READ_STATUS = {
    "owner": 200, "member": 200, "lead": 200, "outsider": 404, "staff": 200,
    "maps_token": 200, "vision_token": 404, "revoked_token": 401, "anonymous": 401,
}  # fmt: skip


@pytest.fixture
def job(submit):
    return submit()


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_shows_a_job_to_its_team_only(as_persona, persona, job):
    response = as_persona(persona).get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == READ_STATUS[persona]
    if response.status_code == 200:
        assert response.json()["name"] == "resnet"


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_shows_events_to_the_team_only(as_persona, persona, job):
    response = as_persona(persona).get(f"/api/v1/jobs/{job.pk}/events/")
    assert response.status_code == READ_STATUS[persona]
    if response.status_code == 200:
        assert [event["kind"] for event in response.json()["results"]] == ["submitted"]


def test_another_teams_job_is_not_found_with_a_message(as_persona, job):
    response = as_persona("outsider").get(f"/api/v1/jobs/{job.pk}/")
    assert response.json() == {"detail": f"No job {job.pk} among the jobs you can see."}


def test_a_missing_job_is_404(as_persona):
    assert as_persona("staff").get("/api/v1/jobs/999999/").status_code == 404


@pytest.fixture
def mixed_jobs(submit, vision, outsider, lead):
    return {
        "maps-a": submit(name="maps-a"),
        "maps-b": submit(name="maps-b", tier="experiment", user=lead),
        "vision-a": submit(team=vision, user=outsider, name="vision-a"),
    }


def names(response):
    assert response.status_code == 200, response.json()
    return [job["name"] for job in response.json()["results"]]


def test_the_list_holds_only_visible_jobs(as_persona, mixed_jobs):
    assert sorted(names(as_persona("member").get("/api/v1/jobs/"))) == ["maps-a", "maps-b"]
    assert sorted(names(as_persona("maps_token").get("/api/v1/jobs/"))) == ["maps-a", "maps-b"]
    assert names(as_persona("vision_token").get("/api/v1/jobs/")) == ["vision-a"]
    assert len(names(as_persona("staff").get("/api/v1/jobs/"))) == 3


def test_the_list_filters_by_team_state_tier_and_owner(as_persona, mixed_jobs):
    client = as_persona("staff")
    assert sorted(names(client.get("/api/v1/jobs/?team=vision"))) == ["vision-a"]
    assert names(client.get("/api/v1/jobs/?tier=experiment")) == ["maps-b"]
    assert names(client.get("/api/v1/jobs/?owner=lead")) == ["maps-b"]
    assert len(names(client.get("/api/v1/jobs/?state=queued,running"))) == 3
    assert names(client.get("/api/v1/jobs/?state=running")) == []


def test_the_list_explains_a_bad_filter(as_persona):
    response = as_persona("staff").get("/api/v1/jobs/?state=sleeping")
    assert response.status_code == 400 and "state" in response.json()


def test_the_list_orders_and_pages(as_persona, mixed_jobs):
    client = as_persona("staff")
    assert names(client.get("/api/v1/jobs/?ordering=id")) == ["maps-a", "maps-b", "vision-a"]
    assert names(client.get("/api/v1/jobs/?ordering=-id")) == ["vision-a", "maps-b", "maps-a"]
    first = client.get("/api/v1/jobs/?ordering=id&page_size=2").json()
    assert first["count"] == 3 and len(first["results"]) == 2 and first["next"]
    assert [job["name"] for job in client.get(first["next"]).json()["results"]] == ["vision-a"]


@pytest.mark.parametrize("ordering", ["gpu_total", "-gpu_total", "-started_at", "position"])
def test_pages_of_an_ordering_with_ties_show_every_job_once_in_id_order_among_equals(as_persona, submit, ordering):
    # 300 copies of one job tie on every field but the id: without an id to end the order, PostgreSQL gave tied
    # rows in an order of its own for each page, repeating some jobs and never showing others.
    first = submit()
    fields = {f.attname: getattr(first, f.attname) for f in Job._meta.concrete_fields if f.attname != "id"}
    Job.objects.bulk_create(Job(**{**fields, "name": f"copy-{n}", "idempotency_key": ""}) for n in range(299))
    ids = sorted(Job.objects.values_list("id", flat=True), reverse=ordering.startswith("-"))
    client, seen, path = as_persona("owner"), [], f"/api/v1/jobs/?ordering={ordering}&page_size=25"
    while path:
        body = client.get(path).json()
        seen += [job["id"] for job in body["results"]]
        path = body["next"]
    assert seen == ids


def test_the_queue_is_in_order_and_scoped(as_persona, mixed_jobs):
    assert names(as_persona("maps_token").get("/api/v1/queue/")) == ["maps-a", "maps-b"]
    assert len(names(as_persona("staff").get("/api/v1/queue/"))) == 3
    assert as_persona("anonymous").get("/api/v1/queue/").status_code == 401


def test_the_queue_of_one_team_keeps_each_jobs_place_in_the_whole_queue(as_persona, mixed_jobs):
    staff = as_persona("staff")
    whole = {job["name"]: job["position"] for job in staff.get("/api/v1/queue/").json()["results"]}
    maps = staff.get("/api/v1/queue/?team=maps").json()
    assert [job["name"] for job in maps["results"]] == ["maps-a", "maps-b"] and maps["count"] == 2
    assert [job["position"] for job in maps["results"]] == [whole["maps-a"], whole["maps-b"]]
    # A team's token sees none of another team's jobs by asking for it: it is told which team it can see.
    assert as_persona("maps_token").get("/api/v1/queue/?team=vision").status_code == 400
    assert names(as_persona("maps_token").get("/api/v1/queue/?team=maps")) == ["maps-a", "maps-b"]


def test_every_time_in_a_job_is_written_in_drfs_one_format(as_persona, job):
    """A reservation's start is kept as text in a JSON column (as the admission loop writes it); it is
    written as the job's other times are, `...Z`, never `+00:00`."""
    from datetime import datetime, timedelta, timezone as dt_timezone

    from rest_framework import serializers

    from jobs.models import Job

    start = datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt_timezone.utc)
    Job.objects.filter(pk=job.pk).update(eta=start, checkpointed_at=start - timedelta(hours=1), reservation={
        "start": start.isoformat(), "placement": {"node-01": 1}, "nodes": ["node-01"]})  # fmt: skip
    shown = as_persona("owner").get(f"/api/v1/jobs/{job.pk}/").json()
    drf = serializers.DateTimeField().to_representation
    assert shown["reservation"]["start"] == shown["eta"] == drf(start) == "2030-01-02T03:04:05Z"
    times = [shown["reservation"]["start"]] + [shown[name] for name in (
        "eta", "submitted_at", "queued_at", "updated_at", "checkpointed_at")]  # fmt: skip
    assert all(moment.endswith("Z") and "+" not in moment for moment in times), times


@pytest.fixture
def interleaved(maps, vision, owner, outsider, submit):
    """Eleven jobs of maps and vision submitted in turns, three of them at one instant (the id breaks
    the tie), and `owner` in both teams."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Job
    from tenants.models import Membership

    Membership.objects.create(user=owner, team=vision, role=Membership.Role.MEMBER)
    start = timezone.now() - timedelta(hours=1)
    jobs = [submit(team=(maps, vision)[n % 3 == 0], name=f"job-{n}") for n in range(11)]
    for n, job in enumerate(jobs):
        Job.objects.filter(pk=job.pk).update(submitted_at=start + timedelta(minutes=min(n, 7)))
    return [job.name for job in sorted(Job.objects.all(), key=lambda job: (job.submitted_at, job.pk), reverse=True)]


def every_page(client, path: str) -> list[str]:
    seen, response = [], client.get(path).json()
    while True:
        seen += [job["name"] for job in response["results"]]
        if not response["next"]:
            return seen
        response = client.get(response["next"]).json()


@pytest.mark.parametrize("persona", ["owner", "staff"])
@pytest.mark.parametrize("merged_most", [20_000, 5])  # 5: every page past the first few is read the plain way
def test_a_list_of_several_teams_pages_newest_first_like_one_sort(as_persona, interleaved, persona, merged_most,
                                                                   monkeypatch):  # fmt: skip
    monkeypatch.setattr("jobs.selectors.MERGED_MOST", merged_most)
    client = as_persona(persona)
    assert every_page(client, "/api/v1/jobs/?page_size=3") == interleaved
    assert every_page(client, "/api/v1/jobs/?page_size=4&state=queued") == interleaved
    assert client.get("/api/v1/jobs/?page_size=3").json()["count"] == 11
    assert every_page(client, "/api/v1/jobs/?page_size=3&ordering=id") == sorted(interleaved, key=lambda n: int(n[4:]))
    assert every_page(client, "/api/v1/jobs/?page_size=3&team=vision") == [n for n in interleaved if int(n[4:]) % 3 == 0]
    assert client.get("/api/v1/jobs/?page_size=3&page=5").status_code == 404
