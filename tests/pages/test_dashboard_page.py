"""The dashboard and its polled `live` fragment."""

from __future__ import annotations

import pytest

from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_it_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("persona", ["owner", "member", "lead", "outsider", "staff"])
def test_it_opens_for_every_signed_in_persona(request, login, persona, maps, vision):
    response = login(request.getfixturevalue(persona)).get("/")
    assert response.status_code == 200
    assert b'id="live"' in response.content
    assert b"Node map" in response.content


def test_it_shows_a_waiting_job_with_its_position_and_reason(login, owner, fill_and_wait):
    (job,) = fill_and_wait(1, prefix="huge")
    body = login(owner).get("/").content.decode()
    assert f'id="queue-row-{job.pk}"' in body
    assert job.reason and job.reason in body
    assert '<td class="num">1</td>' in body


def test_it_hides_other_teams_jobs(login, outsider, fill_and_wait):
    fill_and_wait(1, prefix="maps-secret")
    body = login(outsider).get("/").content.decode()
    assert "maps-secret" not in body
    assert "filler" not in body  # the node map names no job of another team
    assert "1 more waiting job of other teams not shown" in body


def test_staff_see_every_teams_queue(login, staff, fill_and_wait):
    fill_and_wait(1, prefix="maps-big")
    assert "maps-big-0" in login(staff).get("/").content.decode()


def test_the_live_fragment_is_a_partial_that_keeps_polling(login, owner, htmx, cycle):
    cycle()
    response = login(owner).get("/", **htmx)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<div id="live"')
    assert 'hx-trigger="every' in body
    assert "HX-Request" in response["Vary"]


def test_the_node_map_has_one_cell_per_gpu_coloured_by_team(login, staff, submit, cycle):
    submit(name="small", replicas=[{"role": "Worker", "count": 1, "gpu": 3}])
    cycle()
    body = login(staff).get("/").content.decode()
    assert body.count("<i></i>") + body.count('<i class="free"></i>') == 16  # two nodes of 8 GPUs
    assert body.count('<i class="free"></i>') == 13
    assert '<span class="t0 m0" title="maps: small (#' in body and "· 3 GPUs" in body


def test_the_team_bars_show_borrowing(login, staff, submit, cycle):
    submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # 12 > 8 nominal
    cycle()
    body = login(staff).get("/").content.decode()
    assert "+4 borrowed" in body
    assert 'class="seg borrowed"' in body


def test_the_queue_is_paginated(login, staff, fill_and_wait, htmx):
    fill_and_wait(30)
    client = login(staff)
    first = client.get("/").content.decode()
    assert first.count('id="queue-row-') == 25
    assert "Page 1 of 2" in first
    second = client.get("/?page=2", **htmx).content.decode()
    assert second.count('id="queue-row-') == 5
    assert 'hx-get="/?part=queue&amp;page=2"' in second  # polling the queue keeps the page


def test_queries_do_not_grow_with_the_jobs_shown(login, staff, fill_and_wait, django_assert_max_num_queries, htmx):
    client = login(staff)
    fill_and_wait(2, prefix="few")
    with django_assert_max_num_queries(20):  # the reservations drawn on the node map; the waiting count the tiles read
        client.get("/")
    fill_and_wait(40, prefix="many")
    with django_assert_max_num_queries(20):  # the reservations drawn on the node map; the waiting count the tiles read
        client.get("/")
    with django_assert_max_num_queries(20):  # the reservations drawn on the node map; the waiting count the tiles read
        client.get("/", **htmx)


def test_it_says_what_to_do_when_nothing_waits(login, db, maps):
    user = make_user("new", teams=[maps])
    body = login(user).get("/").content.decode()
    assert "No job is waiting." in body
    assert "No nodes read yet" in body


def test_a_team_bar_counts_its_waiting_gpus_in_gpus(login, owner, fill_and_wait):
    """Beside the "Jobs waiting" tile, a bare "16 waiting" would read as 16 jobs where 2 jobs wait for 16 GPUs."""
    fill_and_wait(2, prefix="big")
    body = login(owner).get("/").content.decode()
    assert "· 16 GPUs waiting" in body
    assert "· 16 waiting" not in body
