"""GPUs held by pods Gangway did not create (kubectl, a notebook...) on the dashboard: none of them is free, and
every figure says them apart from what Gangway's jobs hold, in the same words over a GPU type's team bars, over
its group of the node map and on a node, with the numbers /api/v1/cluster and /metrics give."""

from __future__ import annotations

import re

import pytest

from jobs.models import Job
from scheduling.cluster.base import OutsidePod
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.models import SimNode
from tests.conftest import A100_LABEL
from tests.deploy.test_metrics import scrape
from tests.pages.test_cordoned_nodes import cordon

pytestmark = pytest.mark.django_db


@pytest.fixture
def outside(monkeypatch):
    """Pods Gangway did not create, as the cluster reports them from the next cycle on: `outside(node, gpus)`
    adds one."""
    pods: list[OutsidePod] = []
    monkeypatch.setattr(SimulatedCluster, "outside_usage", lambda self: list(pods))

    def _add(node: str, gpu: int) -> None:
        pods.append(OutsidePod(namespace="default", name=f"kubectl-run-{len(pods)}", node=node, gpu=gpu))

    return _add


@pytest.fixture
def shared_a100(gpu_types, submit, outside, cycle):
    """node-01's 8 a100 GPUs: maps' `train-a100` holds 4, a pod started with kubectl 2; node-02's 8 l4 GPUs are free."""
    outside("node-01", 2)
    job = submit(name="train-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()
    job.refresh_from_db()
    assert job.state in Job.ACTIVE_STATES and set(job.placement) == {"node-01"}


def _map_heads(body: str) -> dict[str, str]:
    """Each group heading of the node map: {its heading: what it counts}."""
    return {kind: note for kind, note in re.findall(r'<h3 class="node-group">(.+?) <span class="muted">· ([^<]+)</span>', body)}


def _type_heads(body: str) -> dict[str, str]:
    """Each GPU type's heading over the team bars: {its type: what it counts, its description left out}."""
    return {kind: note.split(" · ")[0] for kind, note in
            re.findall(r'<h3 class="type-head">(\S+) <span class="muted">· ([^<]+)</span>', body)}


def _free_cells(body: str) -> dict[str, int]:
    parts = re.split(r'<h3 class="node-group">(\S+) ', body)
    return {kind: html.count('<i class="free"></i>') for kind, html in zip(parts[1::2], parts[2::2])}


def _parts(client, htmx) -> tuple[str, str]:
    return (client.get("/?part=nodes", **htmx).content.decode(), client.get("/?part=teams", **htmx).content.decode())


def test_a_type_s_heading_on_the_map_and_over_its_bars_say_the_outside_pod_apart_in_the_same_words(
        login, owner, shared_a100, htmx):  # fmt: skip
    nodes, teams = _parts(login(owner), htmx)

    assert _map_heads(nodes)["a100"] == "1 node, 4 of 8 GPUs in use, 2 more used outside Gangway"
    assert _type_heads(teams)["a100"] == "4 of 8 GPUs in use, 2 more used outside Gangway"
    assert _map_heads(nodes)["l4"] == "1 node, 0 of 8 GPUs in use"
    assert _type_heads(teams)["l4"] == "0 of 8 GPUs in use"


def test_a_node_s_words_say_the_outside_pod_apart_too(login, owner, shared_a100, htmx):
    nodes = login(owner).get("/?part=nodes", **htmx).content.decode()

    assert 'title="node-01: 4 of 8 GPUs in use, 2 more used outside Gangway"' in nodes
    assert re.search(r'<span class="outside" title="used outside Gangway">(?:<i></i>){2}</span>', nodes)


def test_what_the_headings_leave_free_is_what_the_map_draws_free_and_what_the_api_and_metrics_give(
        login, owner, shared_a100, htmx, client):  # fmt: skip
    logged_in = login(owner)
    nodes, teams = _parts(logged_in, htmx)
    cluster = logged_in.get("/api/v1/cluster/").json()["by_type"]
    metrics = scrape(client)
    free = _free_cells(nodes)
    for kind, note in _map_heads(nodes).items():
        in_use, capacity, more = re.fullmatch(r"\d+ nodes?, (\d+) of (\d+) GPUs in use(?:, (\d+) more used outside Gangway)?",
                                              note).groups()  # fmt: skip
        in_use, capacity, more = int(in_use), int(capacity), int(more or 0)
        assert capacity - in_use - more == free[kind] == cluster[kind]["free"], note
        assert (cluster[kind]["in_use"], cluster[kind]["outside"], cluster[kind]["capacity"]) == (in_use, more, capacity)
        assert metrics[("gangway_cluster_type_gpus", (("gpu_type", kind), ("kind", "used")))] == in_use
        assert metrics[("gangway_cluster_type_gpus", (("gpu_type", kind), ("kind", "outside")))] == more
        assert _type_heads(teams)[kind] == note.split(", ", 1)[1]


def test_a_group_of_nodes_no_type_matches_says_its_outside_pods_apart(login, owner, gpu_types, outside, cycle, htmx):
    SimNode.objects.create(name="node-03", gpu=8, labels={"nvidia.com/gpu.product": "Tesla-T4"})
    outside("node-03", 3)
    cycle()

    heads = _map_heads(login(owner).get("/?part=nodes", **htmx).content.decode())

    assert heads["untyped — no job can use their GPUs (their labels match no GPU type)"] == (
        "1 node, 0 of 8 GPUs in use, 3 more used outside Gangway")


def test_on_a_drained_node_only_gangway_s_jobs_count_as_in_use_on_the_map_as_over_the_bars_and_in_the_api(
        login, owner, gpu_types, submit, outside, cycle, htmx):  # fmt: skip
    """node-01 (a100) is cordoned under maps' job of 6 GPUs, beside a kubectl pod of 2: the map's heading said
    8 of them in use where the bars, the API and /metrics said 6."""
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3, labels=dict([A100_LABEL]))
    outside("node-01", 2)
    job = submit(name="old-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()
    job.refresh_from_db()
    assert set(job.placement) == {"node-01"}
    cordon("node-01")
    cycle()
    client = login(owner)

    nodes, teams = _parts(client, htmx)

    apart = "8 GPUs more on 1 node that takes no new jobs, 6 of them in use"
    assert _map_heads(nodes)["a100"] == f"2 nodes, 0 of 8 GPUs in use; {apart}"
    assert _type_heads(teams)["a100"] == f"0 of 8 GPUs in use; {apart}"
    assert client.get("/api/v1/cluster/").json()["by_type"]["a100"]["unschedulable_used"] == 6
