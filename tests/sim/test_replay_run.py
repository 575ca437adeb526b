"""The replay as `manage.py replay` and `bench/replay.py` run it: options, files."""

from __future__ import annotations

import csv
import re

import pytest

from scheduling.sim.run import config_from, load_jobs, run
from scheduling.sim.trace import TraceError, synthetic_teams

OLD_COLUMNS = ["policy", "load", "jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct",
               "avg_queue", "median_queue", "p99_queue", "makespan", "utilization",
               "preemptions", "lost_gpu_hours", "partial_gang_gpu_hours", "guarantee_kept",
               "jain_slowdown"]


def test_it_writes_the_new_columns_after_the_old_ones_and_the_size_plot(tmp_path):
    config = config_from({"synthetic": 150, "seed": 2, "policy": ["gangway", "isolated-fifo"],
                          "load": [4.0], "out": str(tmp_path), "quiet": True,
                          "estimates": "oracle", "partition": "nodes"})
    assert (config.estimates, config.partition) == ("oracle", "nodes")
    result = run(config)
    with open(tmp_path / "summary.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == OLD_COLUMNS + ["reserved_idle_gpu_hours", "p99_queue_big", "max_queue_big"]
    assert [row[0] for row in rows[1:]] == ["gangway", "isolated-fifo"]
    with open(tmp_path / "teams.csv", newline="") as handle:
        assert "reserved_idle_gpu_hours" not in next(csv.reader(handle))
    assert (tmp_path / "queue_by_size.png").stat().st_size > 0
    assert "reserved idle GPU-h" in result.table


def test_it_defaults_to_learned_estimates_on_shared_nodes():
    config = config_from({"synthetic": 10})
    assert (config.estimates, config.partition) == ("history", "shared")


def test_a_synthetic_cluster_of_many_nodes_is_split_over_teams_few_large_many_small():
    teams = synthetic_teams(1000, 10)
    sizes = [size for _, size in teams]
    assert sum(sizes) == 1000 * 8 and all(size % 8 == 0 for size in sizes)
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 8 * sizes[-1]
    assert [name for name, _ in teams][:2] == ["t0", "t1"]
    assert synthetic_teams(3, 3) == (("t0", 8), ("t1", 8), ("t2", 8))


def test_the_synthetic_options_shape_the_cluster_and_the_span():
    config = config_from({"synthetic": 400, "seed": 5, "nodes": 40, "team_count": 4,
                          "span": 2.0, "load": [1.0], "policy": ["pooled-fifo"], "quiet": True})
    trace = load_jobs(config, 1.0)
    assert trace.teams == synthetic_teams(40, 4)
    assert len(trace.jobs) == 400
    assert 86400 < max(job.submit for job in trace.jobs) < 2 * 86400
    assert max(job.submit for job in load_jobs(config, 4.0).jobs) < 86400 / 2
    assert run(config).rows[0]["jobs"] == 400


@pytest.mark.parametrize("options, message", [
    ({"nodes": 100}, "--nodes: only for a synthetic trace; add --synthetic N"),
    ({"span": 3.0}, "--span: only for a synthetic trace"),
    ({"synthetic": 10, "team_count": 4}, "--team-count splits the nodes of --nodes"),
    ({"synthetic": 10, "nodes": 3, "team_count": 4}, "between 1 and --nodes (3), got 4"),
    ({"synthetic": 10, "span": -1.0}, "--span must be a positive number of days, got -1"),
])
def test_a_synthetic_option_out_of_place_or_range_is_refused_with_a_sentence(options, message):
    with pytest.raises(TraceError, match=re.escape(message)):
        config_from(options)


def test_set_replays_gangway_under_other_settings_and_names_them_in_its_rows():
    config = config_from({"synthetic": 60, "seed": 2, "load": [4.0], "quiet": True,
                          "policy": ["gangway", "gangway-hold", "kueue-like"],
                          "policy_settings": ["max_reservations=2", "starvation_after=0"]})
    assert config.settings == (("max_reservations", 2), ("starvation_after", 0))
    assert [row["policy"] for row in run(config).rows] == [
        "gangway[max_reservations=2,starvation_after=0]",
        "gangway-hold[max_reservations=2,starvation_after=0]", "kueue-like"]


@pytest.mark.parametrize("pairs, message", [
    (["bogus=1"], "--set bogus=1: the setting must be one of starvation_after, "),
    (["starvation_after=soon"], "--set starvation_after=soon: expected starvation_after=N"),
    (["starvation_after=-5"], "N a whole number of at least 0"),
    (["max_reservations=1", "max_reservations=2"], "--set max_reservations: given twice"),
])
def test_a_bad_setting_is_refused_with_a_sentence(pairs, message):
    with pytest.raises(TraceError, match=re.escape(message)):
        config_from({"synthetic": 10, "policy_settings": pairs})
