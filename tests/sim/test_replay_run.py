"""The replay as `manage.py replay` and `bench/replay.py` run it: options, files."""

from __future__ import annotations

import csv

from scheduling.sim.run import config_from, run

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
