"""The node map's heading per GPU type counts its GPUs as the rest of the dashboard does: the capacity of the
nodes that take new pods, with the GPUs of a cordoned or tainted node of the type told apart, never counted as
if a job could have them."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from scheduling.models import SimNode
from tests.conftest import A100_LABEL
from tests.pages.test_cordoned_nodes import cordon

pytestmark = pytest.mark.django_db


@pytest.fixture
def drained_a100(gpu_types, submit, cycle):
    """Two a100 nodes of 8 GPUs: `secret-a100` (6 GPUs of maps) runs on the one that has since been cordoned;
    the other takes jobs, all its GPUs free. node-02 holds the 8 l4 GPUs. Returns the cordoned node's name."""
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3, labels=dict([A100_LABEL]))
    job = submit(name="secret-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()
    job.refresh_from_db()
    (held,) = set(job.placement)
    cordon(held)
    cycle()
    return held


def _groups(body: str) -> dict[str, str]:
    """Each group heading of the map: {its type: what it counts}."""
    return dict(re.findall(r'<h3 class="node-group">(\S+) <span class="muted">· ([^<]+)</span>', body))


def _free_cells(body: str) -> dict[str, int]:
    """How many GPUs each group of the map draws free."""
    parts = re.split(r'<h3 class="node-group">(\S+) ', body)
    return {kind: html.count('<i class="free"></i>') for kind, html in zip(parts[1::2], parts[2::2])}


def test_a_type_s_heading_counts_the_nodes_taking_jobs_and_tells_the_cordoned_one_apart(login, owner, drained_a100, htmx):
    groups = _groups(login(owner).get("/?part=nodes", **htmx).content.decode())
    assert groups["a100"] == "2 nodes, 0 of 8 GPUs in use; 8 GPUs more on 1 node that takes no new jobs, 6 of them in use"
    assert groups["l4"] == "1 node, 0 of 8 GPUs in use"


def test_an_uncordoned_node_s_gpus_count_again(login, owner, drained_a100, cycle, htmx):
    client = login(owner)
    assert "8 GPUs more on 1 node" in _groups(client.get("/?part=nodes", **htmx).content.decode())["a100"]
    cordon(drained_a100, schedulable=True)
    cycle()
    assert _groups(client.get("/?part=nodes", **htmx).content.decode())["a100"] == "2 nodes, 6 of 16 GPUs in use"


def test_what_a_heading_leaves_free_is_what_its_map_draws_free_and_what_the_type_bars_count(login, owner, drained_a100, htmx):
    client = login(owner)
    nodes = client.get("/?part=nodes", **htmx).content.decode()
    teams = client.get("/?part=teams", **htmx).content.decode()
    free = _free_cells(nodes)
    for kind, note in _groups(nodes).items():
        used, capacity = map(int, re.match(r"\d+ nodes?, (\d+) of (\d+) GPUs in use", note).groups())
        assert capacity - used == free[kind], f"{kind}: the heading says {note!r}, the map draws {free[kind]} free"
        assert re.search(rf'<h3 class="type-head">{kind} <span class="muted">· \d+ of {capacity} GPUs in use', teams)


def test_a_type_whose_every_node_takes_no_new_jobs_says_so(login, staff, drained_a100, cycle, htmx):
    client = login(staff)
    cordon("node-02")
    cycle()
    assert _groups(client.get("/?part=nodes", **htmx).content.decode())["l4"] == "1 node, none taking new jobs: 8 GPUs"
    cordon(({"node-01", "node-03"} - {drained_a100}).pop())
    cycle()
    groups = _groups(client.get("/?part=nodes", **htmx).content.decode())
    assert groups["a100"] == "2 nodes, none taking new jobs: 16 GPUs, 6 of them in use"
