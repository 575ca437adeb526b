"""The dashboard on a cluster with GPU types: the team bars and the node map come in one group per
type; without types they are as they always were."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from scheduling.models import SimNode

pytestmark = pytest.mark.django_db


@pytest.fixture
def typed_cluster(gpu_types, submit, cycle):
    """maps runs `secret-a100` (6 a100 GPUs: 4 nominal + 2 borrowed) on node-01; node-03 holds 8 GPUs
    whose labels match no type, node-04 has no GPUs."""
    SimNode.objects.create(name="node-03", gpu=8, labels={"nvidia.com/gpu.product": "Tesla-T4"})
    SimNode.objects.create(name="node-04", gpu=0)
    job = submit(name="secret-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()


def _groups(body: str, heading_class: str) -> list[str]:
    return re.findall(rf'<h3 class="{heading_class}">([^<]+)', body)


def test_the_team_bars_come_in_one_group_per_type_with_its_capacity(login, owner, typed_cluster, htmx):
    body = login(owner).get("/?part=teams", **htmx).content.decode()
    assert [g.strip() for g in _groups(body, "type-head")] == ["l4", "a100"]
    assert "0 of 8 GPUs in use · 24 GB, inference and small runs" in body
    assert "6 of 8 GPUs in use · 80 GB, large training" in body
    assert "maps: 6 of 4 nominal a100 GPUs in use, 2 borrowed, 0 lent, 0 idle" in body
    assert "vision: 0 of 4 nominal a100 GPUs in use, 0 borrowed, 2 lent, 2 idle" in body
    assert "maps: 0 of 4 nominal l4 GPUs in use, 0 borrowed, 0 lent, 4 idle" in body


def test_a_type_no_team_has_says_so(login, owner, typed_cluster, htmx, maps, vision, cycle):
    for team in (maps, vision):
        team.quotas.filter(resource="gpu:l4").delete()
    cycle()
    body = login(owner).get("/?part=teams", **htmx).content.decode()
    assert "No team has quota, use or waiting jobs of l4 GPUs." in body


def test_the_node_map_has_a_heading_per_type_and_one_for_untyped_gpus(login, owner, typed_cluster, htmx):
    body = login(owner).get("/?part=nodes", **htmx).content.decode()
    assert [g.strip() for g in _groups(body, "node-group")] == [
        "l4", "a100", "untyped — no job can use their GPUs (their labels match no GPU type)", "without GPUs"]
    assert "1 node, 6 of 8 GPUs in use" in body
    order = [body.index(f'<span class="node-name">{name}</span>') for name in ("node-02", "node-01", "node-03", "node-04")]
    assert order == sorted(order)
    assert "secret-a100" in body  # the viewer's own team's job is named


def test_an_outsider_reads_the_typed_parts_without_other_teams_job_names(login, outsider, typed_cluster, htmx):
    client = login(outsider)
    for part in ("teams", "nodes"):
        response = client.get(f"/?part={part}", **htmx)
        assert response.status_code == 200
        assert "secret-a100" not in response.content.decode()
    assert "maps: 6 of 4 nominal a100 GPUs in use" in client.get("/?part=teams", **htmx).content.decode()


@pytest.mark.parametrize("part", ["teams", "nodes"])
def test_the_typed_parts_require_login(client, typed_cluster, htmx, part):
    response = client.get(f"/?part={part}", **htmx)
    assert response.status_code == 200 and response["HX-Redirect"].startswith("/login/")  # the page, to sign in


def test_without_types_the_dashboard_has_no_type_groups(login, owner, submit, cycle):
    submit()
    cycle()
    body = login(owner).get("/").content.decode()
    assert "type-group" not in body and "node-group" not in body
    assert "maps: 2 of 8 nominal GPUs in use, 0 borrowed, 0 lent, 6 idle" in body
