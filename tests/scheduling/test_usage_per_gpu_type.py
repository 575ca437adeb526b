"""GPU figures per type: the loop stores each team's figures of every type beside its totals, the
selectors read them back in the cluster's order, and usage samples keep one row per team and type."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling.models import Cycle, UsageSample
from scheduling.selectors import cluster_summary, latest_gpu_usage, team_usage, usage_series

pytestmark = pytest.mark.django_db

FIGURES = ("nominal", "used", "within", "borrowed", "lent", "idle", "waiting")


def asking(job: Job, *types: str) -> Job:
    Job.objects.filter(pk=job.pk).update(gpu_type=list(types))
    return job


@pytest.fixture
def maps_borrows_a100(gpu_types, submit, cycle):
    """maps runs 6 a100 GPUs on node-01 (4 nominal, 2 borrowed from vision's idle a100)."""
    asking(submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 6}]), "a100")
    return cycle()


def test_the_cycle_stores_each_teams_figures_per_type_in_the_clusters_order(maps_borrows_a100):
    stored = {team["team"]: team for team in Cycle.objects.latest().gpu_usage}
    maps = stored["maps"]
    assert [entry["gpu_type"] for entry in maps["by_type"]] == ["l4", "a100"]
    l4, a100 = maps["by_type"]
    assert (a100["used"], a100["within"], a100["borrowed"], a100["borrowed_from"]) == (6, 4, 2, {"vision": 2})
    assert (l4["used"], l4["idle"]) == (0, 4)
    for field in FIGURES:
        assert maps[field] == l4[field] + a100[field]
    vision_l4, vision_a100 = stored["vision"]["by_type"]
    assert (vision_a100["lent"], vision_l4["lent"]) == (2, 0)


def test_team_usage_reads_the_figures_of_each_type(maps_borrows_a100):
    usage = {u.slug: u for u in team_usage()}
    maps = usage["maps"]
    assert list(maps.by_type) == ["l4", "a100"]
    assert (maps.used, maps.borrowed, maps.nominal) == (6, 2, 8)
    assert (maps.by_type["a100"].used, maps.by_type["a100"].borrowed, maps.by_type["a100"].borrowing_limit) == (6, 2, 4)
    assert maps.by_type["a100"].borrowed_from == {"vision": 2} and maps.by_type["l4"].borrowed_from == {}
    # Its total borrowing limit is its types' added up: 4 of l4 and 4 of a100.
    assert maps.borrowing_limit == 8
    assert usage["vision"].by_type["a100"].lent == 2


def test_the_cluster_summary_gives_each_types_capacity_and_teams(maps_borrows_a100):
    summary = cluster_summary()
    assert [(t.name, t.capacity, t.used, t.free) for t in summary.by_type] == [("l4", 8, 0, 8), ("a100", 8, 6, 2)]
    assert summary.by_type[1].description == "80 GB, large training"
    assert [team.slug for team in summary.by_type[1].teams] == ["maps", "vision"]


def test_usage_samples_keep_the_total_and_one_row_per_type(maps_borrows_a100, maps):
    rows = {s.gpu_type: (s.gpu_used, s.gpu_borrowed, s.gpu_nominal) for s in UsageSample.objects.filter(team=maps)}
    assert rows == {"": (6, 2, 8), "l4": (0, 0, 4), "a100": (6, 2, 4)}
    since = Cycle.objects.latest().started_at
    total, series = usage_series(maps, since, ["l4", "a100"])
    assert [row[1:4] for row in total] == [(6, 2, 8)]
    assert list(series) == ["l4", "a100"] and [row[1] for row in series["a100"]] == [6]


def test_without_types_figures_and_samples_are_as_before(nodes, submit, cycle, maps):
    submit()
    cycle()
    assert "by_type" not in latest_gpu_usage()["maps"]
    (usage,) = team_usage()
    assert usage.by_type == {} and usage.borrowing_limit == 8
    assert cluster_summary().by_type == []
    assert list(UsageSample.objects.filter(team=maps).values_list("gpu_type", flat=True)) == [""]
    total, series = usage_series(maps, Cycle.objects.latest().started_at)
    assert len(total) == 1 and series == {}
