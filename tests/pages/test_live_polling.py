"""Live pages poll cheaply: each polled part carries an ETag and answers 304 while what it shows is unchanged."""

from __future__ import annotations

import pytest
from django.test.utils import CaptureQueriesContext
from django.db import connection

from tenants.services import quota_update

pytestmark = pytest.mark.django_db

DASHBOARD_PARTS = ["tiles", "teams", "nodes", "queue"]


def poll(client, path, etag=None):
    headers = {"HTTP_HX_REQUEST": "true"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get(path, **headers)


def assert_live(response):
    assert response.status_code == 200
    assert response["ETag"].startswith('"')
    assert f'data-etag="{response["ETag"]}"' in response.content.decode().replace("&quot;", '"')
    assert {"HX-Request", "Cookie"} <= {h.strip() for h in response["Vary"].split(",")}
    assert "no-cache" in response["Cache-Control"] and "private" in response["Cache-Control"]


@pytest.mark.parametrize("part", DASHBOARD_PARTS)
def test_a_dashboard_part_answers_304_until_it_changes(login, owner, submit, cycle, part):
    cycle()
    client = login(owner)
    first = poll(client, f"/?part={part}")
    assert_live(first)
    again = poll(client, f"/?part={part}", first["ETag"])
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == first["ETag"]
    submit(name="changes-it", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])  # fills the cluster once admitted
    submit(name="then-waits", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    changed = poll(client, f"/?part={part}", first["ETag"])
    assert_live(changed)
    assert changed["ETag"] != first["ETag"]


@pytest.mark.parametrize("part", DASHBOARD_PARTS)
def test_a_dashboard_part_renders_only_itself(login, owner, cycle, part):
    cycle()
    body = poll(login(owner), f"/?part={part}").content.decode()
    assert body.lstrip().startswith(f'<section id="live-{part}"')
    assert body.count("hx-trigger=") == 1


def test_the_full_page_carries_each_parts_etag_for_its_first_poll(login, owner, cycle):
    cycle()
    client = login(owner)
    page = client.get("/").content.decode().replace("&quot;", '"')
    for part in DASHBOARD_PARTS:
        etag = poll(client, f"/?part={part}")["ETag"]
        assert f'data-etag="{etag}"' in page
        assert poll(client, f"/?part={part}", etag).status_code == 304


def test_a_quota_change_refreshes_the_team_bars(login, owner, staff, cycle, maps):
    cycle()
    client = login(owner)
    etag = poll(client, "/?part=teams")["ETag"]
    assert poll(client, "/?part=teams", etag).status_code == 304
    quota_update(team=maps, quotas={"gpu": {"nominal": 4, "borrowing_limit": 8, "lending_limit": None}}, actor=staff)
    cycle()  # the change asks for a cycle, whose plan gives the team's figures the bars show
    assert poll(client, "/?part=teams", etag).status_code == 200


def test_an_unchanged_world_answers_a_poll_with_one_small_query(login, staff, fill_and_wait):
    fill_and_wait(3)
    client = login(staff)
    for part in DASHBOARD_PARTS:
        etag = poll(client, f"/?part={part}")["ETag"]
        with CaptureQueriesContext(connection) as queries:
            assert poll(client, f"/?part={part}", etag).status_code == 304
        assert len(queries) <= 3, [q["sql"] for q in queries]  # the session, the user, the world's version


def test_the_etag_belongs_to_the_viewer(login, owner, outsider, cycle, client):
    cycle()
    mine = poll(login(owner), "/?part=queue")["ETag"]
    client.force_login(outsider)
    assert poll(client, "/?part=queue", mine).status_code == 200


def test_a_304_builds_nothing(login, staff, fill_and_wait):
    fill_and_wait(3)
    client = login(staff)
    etag = poll(client, "/?part=nodes")["ETag"]
    with CaptureQueriesContext(connection) as unchanged:
        assert poll(client, "/?part=nodes", etag).status_code == 304
    with CaptureQueriesContext(connection) as rendered:
        assert poll(client, "/?part=nodes").status_code == 200
    assert len(unchanged) <= len(rendered)
    assert len(unchanged) <= 8


def test_polled_parts_need_a_login(client):
    for path in ("/?part=tiles", "/jobs/", "/teams/maps/?part=tiles"):
        assert poll(client, path).status_code == 302


def test_the_job_page_answers_304_until_the_job_changes(login, owner, submit, cycle):
    job = submit(name="one")
    client = login(owner)
    first = poll(client, f"/jobs/{job.pk}/")
    assert_live(first)
    assert poll(client, f"/jobs/{job.pk}/", first["ETag"]).status_code == 304
    cycle()  # admitted: a new event, a new state
    assert poll(client, f"/jobs/{job.pk}/", first["ETag"]).status_code == 200


def test_the_job_page_poll_stays_404_for_an_outsider(login, outsider, submit):
    job = submit(name="theirs")
    assert poll(login(outsider), f"/jobs/{job.pk}/", '"anything"').status_code == 404


def test_my_jobs_polls_and_answers_304_until_a_job_changes(login, owner, submit, cycle):
    submit(name="mine")
    client = login(owner)
    page = client.get("/jobs/").content.decode()
    assert 'hx-trigger="every 10s"' in page and "data-etag=" in page
    first = poll(client, "/jobs/?state=")
    assert_live(first)
    assert poll(client, "/jobs/?state=", first["ETag"]).status_code == 304
    cycle()
    assert poll(client, "/jobs/?state=", first["ETag"]).status_code == 200


@pytest.mark.parametrize("persona", ["member", "outsider"])
def test_the_team_page_polls_its_tiles_and_jobs(request, login, submit, cycle, persona):
    client = login(request.getfixturevalue(persona))
    page = client.get("/teams/maps/").content.decode()
    assert 'id="team-tiles"' in page and 'hx-get="/teams/maps/?part=tiles"' in page
    tiles, jobs = poll(client, "/teams/maps/?part=tiles"), poll(client, "/teams/maps/")
    assert_live(tiles)
    assert_live(jobs)
    assert poll(client, "/teams/maps/?part=tiles", tiles["ETag"]).status_code == 304
    assert poll(client, "/teams/maps/", jobs["ETag"]).status_code == 304
    submit(name="uses-gpus", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    assert poll(client, "/teams/maps/?part=tiles", tiles["ETag"]).status_code == 200
    assert poll(client, "/teams/maps/", jobs["ETag"]).status_code == 200


def test_pages_with_live_parts_have_an_offline_banner_and_an_updated_line(login, owner):
    body = login(owner).get("/").content.decode()
    assert 'id="offline-banner"' in body and 'id="live-status"' in body
    assert "js/live.js" in body and "<script>" not in body


@pytest.mark.parametrize("part", DASHBOARD_PARTS)
def test_an_outsider_polls_every_part_without_reading_another_teams_jobs(login, outsider, fill_and_wait, part):
    (job,) = fill_and_wait(1, prefix="maps-only")
    body = poll(login(outsider), f"/?part={part}").content.decode()
    assert job.name not in body and "filler" not in body
