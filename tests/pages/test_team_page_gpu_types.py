"""A team's page on a cluster with GPU types: its GPUs and quota per type now, and its usage per
type over the last 24 hours; without types the page has neither."""

from __future__ import annotations

import re

import pytest


pytestmark = pytest.mark.django_db


def _row(body: str, name: str) -> list[str]:
    row = body.split(f'<tr id="type-{name}">')[1].split("</tr>")[0]
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_it_shows_the_teams_gpus_and_quota_of_each_type(login, member, maps_on_a100):
    body = login(member).get("/teams/maps/").content.decode()
    assert "GPUs and quota per type" in body
    assert body.index('id="type-l4"') < body.index('id="type-a100"')
    assert _row(body, "a100") == ["a100 80 GB, large training", "6 GPUs", "4 GPUs", "2 GPUs (2 from vision)", "0 GPUs",
                                  "0 GPUs", "0 GPUs", "4 GPUs", "all unused"]
    assert _row(body, "l4")[1:3] == ["0 GPUs", "4 GPUs"]
    assert "may borrow: l4 up to 4 GPUs, a100 up to 4 GPUs" in body


def test_a_type_the_team_has_no_quota_of_says_it_may_only_borrow(login, member, maps_on_a100, maps, cycle):
    maps.quotas.filter(resource="gpu:l4").delete()
    cycle()
    body = login(member).get("/teams/maps/").content.decode()
    assert _row(body, "l4")[2] == "no quota" and _row(body, "l4")[7] == "no limit"
    assert "it may only borrow idle l4 GPUs" in body


def test_a_type_without_limit_does_not_hide_the_limit_of_another(login, member, maps_on_a100, maps, cycle):
    """With no l4 quota, the team's limits add up to none; a tile saying "may borrow: no limit" would
    contradict the a100 row (4 GPUs) and the waiting reasons ("its borrowing limit is 4")."""
    maps.quotas.filter(resource="gpu:l4").delete()
    cycle()
    client = login(member)
    body = client.get("/teams/maps/").content.decode()
    assert "may borrow: l4 no limit, a100 up to 4 GPUs" in body  # in the words of the table's l4 row
    assert "may borrow: no limit" not in body
    teams = client.get("/teams/").content.decode()
    maps_row = teams.split('href="/teams/maps/"')[1].split("</tr>")[0]
    assert re.sub(r"<[^>]+>", "", maps_row).count("l4 no limit · a100 4 GPUs") == 1


def test_it_charts_usage_of_each_type_beside_the_total(login, member, maps_on_a100):
    body = login(member).get("/teams/maps/").content.decode()
    assert 'aria-label="GPUs used by team maps over the last 24 hours' in body
    assert 'aria-label="l4 GPUs used by team maps' in body and 'aria-label="a100 GPUs used by team maps' in body
    assert body.count('<svg class="chart"') == 3


def test_the_types_part_is_polled_and_answers_304_while_unchanged(login, member, maps_on_a100, htmx):
    client = login(member)
    response = client.get("/teams/maps/?part=types", **htmx)
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<section id="team-types"')
    again = client.get("/teams/maps/?part=types", HTTP_IF_NONE_MATCH=response["ETag"], **htmx)
    assert again.status_code == 304


def test_an_outsider_reads_the_types_part_of_another_team(login, outsider, maps_on_a100, htmx):
    response = login(outsider).get("/teams/maps/?part=types", **htmx)
    assert response.status_code == 200 and 'id="type-a100"' in response.content.decode()
    assert "big" not in response.content.decode()


def test_the_types_part_requires_login(client, maps_on_a100, htmx):
    response = client.get("/teams/maps/?part=types", **htmx)
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/login/")  # the page, to sign in


def test_without_types_there_is_no_types_part_and_its_poll_stops(login, member, submit, cycle, htmx):
    submit()
    cycle()
    client = login(member)
    body = client.get("/teams/maps/").content.decode()
    assert "team-types" not in body and "type-chart" not in body
    assert "may borrow up to 8 GPUs" in body
    response = client.get("/teams/maps/?part=types", **htmx)
    assert response.status_code == 286 and response.content == b""
