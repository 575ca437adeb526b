"""GPUs in use during a drain: a job keeps running on a node that takes no new pods (cordoned), so the
dashboard's tiles, the GPU type headings over the team bars and /metrics count the GPUs jobs hold on the
nodes that take pods against those nodes' capacity, and say apart the GPUs of the others and how many of
them are in use, in the words of the node map's headings; never more in use than there is capacity. A
team's own figures (its quota) still count every job it runs, wherever it runs."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.transitions import transition
from scheduling.models import SimJob, SimNode
from tests.conftest import A100_LABEL
from tests.deploy.test_metrics import scrape
from tests.pages.test_cordoned_nodes import cordon

pytestmark = pytest.mark.django_db

APART = "8 GPUs more on 1 node that takes no new jobs, 6 of them in use"


def _placed(job: Job) -> str:
    job.refresh_from_db()
    assert job.state in Job.ACTIVE_STATES
    (node,) = set(job.placement)
    return node


def _cordon_under(old: Job, new: Job, cycle) -> str:
    """Admits `old` and `new` on two nodes, then cordons `old`'s node as a drain begins: `old` keeps running.
    Returns that node's name."""
    cycle()
    held, elsewhere = _placed(old), _placed(new)
    assert held != elsewhere
    cordon(held)
    cycle()
    assert _placed(old) == held
    return held


@pytest.fixture
def drained(submit, vision, cycle):
    """Two nodes of 8 GPUs: maps' `old-run` (6 GPUs) runs on the one cordoned since, its `new-run` (4 GPUs) on
    the other. maps uses 10 GPUs (8 nominal + 2 borrowed); 8 GPUs take new pods, 4 of them in use. Returns the
    cordoned node's name."""
    old = submit(name="old-run", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    new = submit(name="new-run", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    return _cordon_under(old, new, cycle)


@pytest.fixture
def drained_a100(gpu_types, submit, vision, staff, cycle):
    """Two a100 nodes of 8 GPUs: maps' `old-a100` (6 GPUs) runs on the one cordoned since, vision's `new-a100`
    (4 GPUs) on the other; node-02 holds 8 l4 GPUs nobody uses. Returns the cordoned node's name."""
    SimNode.objects.create(name="node-03", gpu=8, cpu=64000, memory=512 * 1024**3, labels=dict([A100_LABEL]))
    old = submit(name="old-a100", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    new = submit(name="new-a100", team=vision, user=staff, replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    Job.objects.filter(pk__in=[old.pk, new.pk]).update(gpu_type=["a100"])
    return _cordon_under(old, new, cycle)


def _in_use_tile(body: str) -> tuple[str, str]:
    """The "GPUs in use" tile: (its value, its note)."""
    value, note = re.search(r'GPUs in use</span><span class="tile-value num">(\d+<small> / \d+</small>)</span>\s*'
                            r'<span class="tile-note">([^<]*)</span>', body).groups()
    return value, note


def _free_tile(body: str) -> int:
    return int(re.search(r'GPUs free</span><span class="tile-value num">(\d+)</span>', body).group(1))


def _type_heads(body: str) -> dict[str, str]:
    """Each GPU type's heading over the team bars: {its type: what it counts, its description left out}."""
    return {kind: note.split(" · ")[0] for kind, note in
            re.findall(r'<h3 class="type-head">(\S+) <span class="muted">· ([^<]+)</span>', body)}


def _map_heads(body: str) -> dict[str, str]:
    return dict(re.findall(r'<h3 class="node-group">(\S+) <span class="muted">· ([^<]+)</span>', body))


def _never_more_in_use_than_capacity(body: str) -> None:
    for used, capacity in re.findall(r"(\d+)(?:<small>)? (?:/|of) (\d+)(?:</small>| GPUs? in use)", body):
        assert int(used) <= int(capacity), f"{used} in use of {capacity}"


# Without GPU types


def test_the_in_use_tile_counts_the_nodes_taking_jobs_and_says_the_drained_one_apart(login, staff, drained):
    body = login(staff).get("/").content.decode()

    assert _in_use_tile(body) == ("4<small> / 8</small>", "50% of the cluster; 8 GPUs more on nodes that take no new "
                                  "jobs (cordoned or tainted), 6 of them in use")  # fmt: skip
    _never_more_in_use_than_capacity(body)


def test_the_free_tile_is_what_the_map_draws_free(login, staff, drained):
    body = login(staff).get("/").content.decode()

    assert _free_tile(body) == 4 == body.count('<i class="free"></i>')


def test_the_team_still_counts_its_job_on_the_drained_node_and_says_where_it_runs(login, owner, drained):
    client = login(owner)
    dashboard = client.get("/").content.decode()
    team = client.get("/teams/maps/").content.decode()

    assert "<b>10</b> / 8 GPUs" in dashboard and "+2 borrowed" in dashboard  # the team's bar: its quota figures
    assert '<span class="tile-value num">10<small> / 8 nominal</small></span>' in team
    assert "6 of them on nodes that take no new jobs; may borrow up to 8 GPUs" in team
    assert "take no new jobs" not in client.get("/teams/vision/").content.decode()  # nothing of vision's runs there


def test_a_job_ending_on_the_drained_node_before_the_next_cycle_moves_no_gpu_into_the_capacity(login, staff, drained,
                                                                                               cycle, htmx):
    """The teams' figures are the latest plan's until the next cycle; where jobs run is read now."""
    client = login(staff)
    old = Job.objects.get(name="old-run")
    if old.state == Job.State.ADMITTED:
        old = transition(old, Job.State.RUNNING, message="Started.")
    transition(old, Job.State.SUCCEEDED, message="Finished.", finished_at=timezone.now())
    SimJob.objects.filter(job_id=old.pk).update(finished_at=timezone.now(), succeeded=True)  # in the cluster too

    ended = client.get("/?part=tiles", **htmx).content.decode()
    assert _in_use_tile(ended) == ("4<small> / 8</small>", "50% of the cluster; 8 GPUs more on nodes that take no "
                                   "new jobs (cordoned or tainted)")  # fmt: skip
    assert "<b>10</b> / 8 GPUs" in client.get("/?part=teams", **htmx).content.decode()  # the plan's, till the cycle

    cycle()
    assert "<b>4</b> / 8 GPUs" in client.get("/?part=teams", **htmx).content.decode()
    assert _in_use_tile(client.get("/?part=tiles", **htmx).content.decode())[0] == "4<small> / 8</small>"


def test_uncordoning_counts_the_node_s_gpus_in_again(login, staff, drained, cycle, htmx):
    client = login(staff)
    assert _in_use_tile(client.get("/?part=tiles", **htmx).content.decode())[0] == "4<small> / 8</small>"

    cordon(drained, schedulable=True)
    cycle()

    body = client.get("/").content.decode()
    assert _in_use_tile(body) == ("10<small> / 16</small>", "62% of the cluster")
    assert _free_tile(body) == 6
    assert "take no new jobs" not in client.get("/teams/maps/").content.decode()


def test_metrics_count_the_gpus_in_use_of_the_capacity_and_the_drained_node_s_apart(client, drained):
    metrics = scrape(client)

    assert metrics[("gangway_cluster_gpus", (("kind", "capacity"),))] == 8
    assert metrics[("gangway_cluster_gpus", (("kind", "used"),))] == 4
    assert metrics[("gangway_unschedulable_gpus", (("kind", "capacity"),))] == 8
    assert metrics[("gangway_unschedulable_gpus", (("kind", "used"),))] == 6
    assert metrics[("gangway_team_gpus_used", (("team", "maps"),))] == 10  # quota: wherever its jobs run


# With GPU types


def test_a_type_s_heading_over_the_bars_reads_as_its_node_map_heading(login, owner, drained_a100, htmx):
    client = login(owner)
    teams = client.get("/?part=teams", **htmx).content.decode()
    nodes = client.get("/?part=nodes", **htmx).content.decode()

    assert _type_heads(teams) == {"l4": "0 of 8 GPUs in use", "a100": f"4 of 8 GPUs in use; {APART}"}
    assert _map_heads(nodes)["a100"] == f"2 nodes, 4 of 8 GPUs in use; {APART}"
    _never_more_in_use_than_capacity(teams)


def test_no_figure_on_the_dashboard_shows_more_in_use_than_capacity(login, staff, drained_a100):
    body = login(staff).get("/").content.decode()

    _never_more_in_use_than_capacity(body)
    assert _in_use_tile(body) == ("4<small> / 16</small>", "25% of the cluster; 8 GPUs more on nodes that take no "
                                  "new jobs (cordoned or tainted), 6 of them in use")  # fmt: skip
    assert _free_tile(body) == 12 == body.count('<i class="free"></i>')


def test_the_team_page_counts_its_gpus_of_a_type_wherever_they_run_and_says_where(login, owner, drained_a100, htmx):
    client = login(owner)
    body = client.get("/teams/maps/").content.decode()

    assert '<span class="tile-value num">6<small> / 8 nominal</small></span>' in body
    assert "6 of them on nodes that take no new jobs; may borrow: l4 up to 4 GPUs, a100 up to 4 GPUs" in body
    types = client.get("/teams/maps/?part=types", **htmx).content.decode()
    row = re.search(r'<tr id="type-a100">.*?</tr>', types, re.S).group(0)
    assert '6 GPUs<span class="muted wraps"> (6 on nodes that take no new jobs)</span>' in row
    assert "take no new jobs" not in re.search(r'<tr id="type-l4">.*?</tr>', types, re.S).group(0)


def test_a_type_whose_every_node_takes_no_new_jobs_says_so_over_its_bars(login, staff, drained_a100, cycle, htmx):
    cordon(({"node-01", "node-03"} - {drained_a100}).pop())
    cycle()

    teams = login(staff).get("/?part=teams", **htmx).content.decode()

    assert _type_heads(teams)["a100"] == "2 nodes, none taking new jobs: 16 GPUs, 10 of them in use"
    _never_more_in_use_than_capacity(teams)


def test_uncordoning_counts_the_type_s_node_in_again(login, owner, drained_a100, cycle, htmx):
    client = login(owner)
    assert _type_heads(client.get("/?part=teams", **htmx).content.decode())["a100"] == f"4 of 8 GPUs in use; {APART}"

    cordon(drained_a100, schedulable=True)
    cycle()

    assert _type_heads(client.get("/?part=teams", **htmx).content.decode())["a100"] == "10 of 16 GPUs in use"
    assert "take no new jobs" not in client.get("/teams/maps/?part=types", **htmx).content.decode()


def test_metrics_count_each_type_s_gpus_in_use_of_its_capacity_and_its_drained_node_s_apart(client, drained_a100):
    metrics = scrape(client)

    def typed(family: str, gpu_type: str, kind: str) -> float:
        return metrics[(family, (("gpu_type", gpu_type), ("kind", kind)))]

    assert typed("gangway_cluster_type_gpus", "a100", "capacity") == 8
    assert typed("gangway_cluster_type_gpus", "a100", "used") == 4
    assert typed("gangway_unschedulable_type_gpus", "a100", "capacity") == 8
    assert typed("gangway_unschedulable_type_gpus", "a100", "used") == 6
    assert typed("gangway_unschedulable_type_gpus", "l4", "capacity") == 0
    assert metrics[("gangway_team_type_gpus_used", (("gpu_type", "a100"), ("team", "maps")))] == 6
