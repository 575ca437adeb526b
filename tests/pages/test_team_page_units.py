"""The team pages write every figure with its unit: the quota history, the list's columns, the summary box."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from scheduling.models import SimNode
from tenants.models import Quota
from tests.conftest import L4_LABEL
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


def test_gpus_borrowed_from_capacity_no_teams_quota_covers_are_counted_beside_the_lenders(
        login, member, submit, cycle, vision):  # fmt: skip
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3)  # 8 GPUs beyond all nominals
    Quota.objects.filter(team__slug="maps", resource="gpu").update(borrowing_limit=None)
    submit(name="wide", replicas=[{"role": "Worker", "count": 3, "gpu": 8}])  # 8 nominal + 8 of vision's + 8 more
    cycle()
    body = login(member).get("/teams/maps/").content.decode()
    tile = re.sub(r"<[^>]+>", "", body.split("Borrowed now")[1].split("</div>")[0])
    assert re.sub(r"\s+", " ", tile).strip() == "16 GPUs 8 from vision, 8 from capacity no team's quota covers"


def test_the_borrowed_and_lent_tiles_carry_their_unit_as_the_waiting_one_does(login, member):
    body = login(member).get("/teams/maps/").content.decode()
    for label in ("Borrowed now", "Lent now", "Waiting"):
        value = body.split(f'<span class="tile-label">{label}</span>')[1].split("</span>")[0]
        assert value.endswith("<small> GPUs</small>"), (label, value)


def test_the_table_of_types_counts_gpus_from_capacity_no_teams_quota_covers_too(login, member, submit, cycle, gpu_types):
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3, labels=dict([L4_LABEL]))
    Quota.objects.filter(team__slug="maps", resource=gpu_types["l4"].resource).update(borrowing_limit=None)
    job = submit(name="wide", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])  # 4 nominal + 4 of vision's + 8
    Job.objects.filter(pk=job.pk).update(gpu_type=["l4"])
    cycle()
    body = login(member).get("/teams/maps/").content.decode()
    row = body.split('<tr id="type-l4">')[1].split("</tr>")[0]
    cell = re.sub(r"<[^>]+>", "", row.split('data-label="Borrowed">')[1].split("</td>")[0])
    assert cell == "12 GPUs (4 from vision, 8 from capacity no team's quota covers)"
