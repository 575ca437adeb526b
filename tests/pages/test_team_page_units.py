"""The team pages write every figure with its unit: the quota history, the list's columns, the summary box."""

from __future__ import annotations

import re

import pytest

from tests.page_forms import opened

pytestmark = pytest.mark.django_db


def test_the_team_page_shows_a_quota_change_in_its_units(login, staff, outsider, maps):
    client = login(staff)
    loaded = opened(client, "/teams/maps/quota/")
    client.post("/teams/maps/quota/", loaded | {"cpu_nominal": "64", "memory_nominal": "512Gi"})
    body = login(outsider).get("/teams/maps/").content.decode()
    assert "cpu nominal no quota -&gt; 64 CPUs" in body and "memory nominal no quota -&gt; 512 GiB" in body
    assert "64000" not in body


def _row_of(body: str, slug: str) -> dict[str, str]:
    """The list's row of team `slug` as read: each cell's text by its column."""
    row = body.split(f'href="/teams/{slug}/"')[1].split("</tr>")[0]
    cells = re.findall(r'<td class="num" data-label="([^"]+)">(.*?)</td>', row, re.S)
    return {label: re.sub(r"<[^>]+>", "", text).strip() for label, text in cells}


def test_the_list_of_teams_gives_every_gpu_figure_its_unit(login, member, submit, cycle, vision):
    submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # maps borrows 4 of vision's
    cycle()
    body = login(member).get("/teams/").content.decode()
    assert _row_of(body, "maps") == {"In use": "12 GPUs +4 borrowed", "Nominal": "8 GPUs", "Borrowing limit": "8 GPUs",
                                     "Lent": "0 GPUs", "Waiting": "0 GPUs", "Weight": "1.0"}  # fmt: skip
    assert _row_of(body, "vision")["Lent"] == "4 GPUs"


def test_the_list_of_teams_gives_each_types_borrowing_limit_its_unit(login, member, maps_on_a100, maps, cycle):
    maps.quotas.filter(resource="gpu:a100").update(borrowing_limit=0)
    cycle()
    body = login(member).get("/teams/").content.decode()
    assert _row_of(body, "maps")["Borrowing limit"] == "l4 4 GPUs · a100 0 GPUs"


def test_a_borrowing_limit_of_0_reads_0_gpus_on_the_tile_as_in_the_table(login, member, maps_on_a100, maps, cycle):
    maps.quotas.filter(resource="gpu:a100").update(borrowing_limit=0)
    cycle()
    body = login(member).get("/teams/maps/").content.decode()
    assert "may borrow: l4 up to 4 GPUs, a100 up to 0 GPUs" in body
    row = body.split('<tr id="type-a100">')[1].split("</tr>")[0]
    assert '<td class="num" data-label="May borrow">0 GPUs</td>' in row


def test_a_borrowing_limit_of_0_reads_0_gpus_without_gpu_types(login, member, maps):
    maps.quotas.filter(resource="gpu").update(borrowing_limit=0)
    assert "may borrow up to 0 GPUs" in login(member).get("/teams/maps/").content.decode()
