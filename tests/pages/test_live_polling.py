"""Live pages poll cheaply: each polled part carries an ETag and answers 304 while what it shows is unchanged."""

from __future__ import annotations

import pytest
from django.test.utils import CaptureQueriesContext
from django.db import connection

from jobs.models import Job
from scheduling.models import Cycle
from scheduling.selectors import live_version
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
        response = poll(client, path)  # the page goes to sign in, the part is not swapped a sign-in page
        assert response.status_code == 200 and response["HX-Redirect"].startswith("/login/")


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


# Parts that show nothing of the cycle itself, only what cycles change, and where they are polled.
QUIET_PARTS = [("dashboard teams", "/?part=teams"), ("dashboard nodes", "/?part=nodes"),
               ("dashboard queue", "/?part=queue"), ("team tiles", "/teams/maps/?part=tiles")]  # fmt: skip


@pytest.mark.parametrize("path", [path for _, path in QUIET_PARTS], ids=[name for name, _ in QUIET_PARTS])
def test_a_cycle_that_changes_nothing_leaves_a_part_unchanged_at_the_cost_of_the_version(login, staff, fill_and_wait,
                                                                                         cycle, path):  # fmt: skip
    fill_and_wait(3)  # a full cluster and three waiting jobs, whose reasons and places are written
    client = login(staff)
    etag = poll(client, path)["ETag"]
    with CaptureQueriesContext(connection) as held:
        assert poll(client, path, etag).status_code == 304
    before = live_version()
    cycle()  # the same plan: nothing admitted, preempted or rejected, no waiting figure written
    assert live_version() == before
    with CaptureQueriesContext(connection) as queries:
        assert poll(client, path, etag).status_code == 304
    # What a poll costs when its ETag is remembered: for the dashboard the session, the user and the version.
    assert len(queries) == len(held) <= (3 if path.startswith("/?") else 6), [q["sql"] for q in queries]


def test_a_cycle_that_admits_a_job_changes_the_version_and_the_parts(login, staff, submit, cycle):
    cycle()
    submit(name="fits", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    client = login(staff)
    etags = {path: poll(client, path)["ETag"] for _, path in QUIET_PARTS}
    before = live_version()
    assert cycle().admitted == 1
    assert live_version() != before
    for path, etag in etags.items():
        assert poll(client, path, etag).status_code == 200, path


def test_a_cycle_that_moves_a_waiting_job_changes_the_version(staff, fill_and_wait, cycle, submit, tiers):
    first, second = fill_and_wait(2)
    before = live_version()
    Job.objects.filter(pk=second.pk).update(tier=tiers["production"])  # now it goes first: places change
    cycle()
    assert live_version() != before
    assert Job.objects.get(pk=second.pk).position == 1


def test_the_tiles_move_with_every_cycle_they_show_the_last_ones_time(login, staff, fill_and_wait, cycle):
    fill_and_wait(3)
    client = login(staff)
    etag = poll(client, "/?part=tiles")["ETag"]
    assert poll(client, "/?part=tiles", etag).status_code == 304
    cycle()
    fresh = poll(client, "/?part=tiles", etag)
    assert fresh.status_code == 200
    assert Cycle.objects.latest().started_at.isoformat() in fresh.content.decode()


def test_a_cycle_that_changes_nothing_leaves_the_team_types_unchanged(login, owner, maps_on_a100, cycle):
    client = login(owner)
    etag = poll(client, "/teams/maps/?part=types")["ETag"]
    before = live_version()
    cycle()
    assert live_version() == before
    assert poll(client, "/teams/maps/?part=types", etag).status_code == 304


def test_the_clocks_turn_reads_a_remembered_part_again_and_refreshes_one_with_relative_times(login, staff,
                                                                                             fill_and_wait,
                                                                                             still_clock):  # fmt: skip
    fill_and_wait(3)
    client = login(staff)
    nodes, queue = (poll(client, f"/?part={part}")["ETag"] for part in ("nodes", "queue"))
    with CaptureQueriesContext(connection) as held:
        assert poll(client, "/?part=nodes", nodes).status_code == 304
    still_clock.turn()
    with CaptureQueriesContext(connection) as turned:
        assert poll(client, "/?part=nodes", nodes).status_code == 304  # read again: the same nodes, the same ETag
    assert len(turned) > len(held)
    assert poll(client, "/?part=queue", queue).status_code == 200  # "waiting 12 min" moves on with the clock
