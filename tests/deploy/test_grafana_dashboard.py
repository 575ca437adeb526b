"""The example Grafana dashboard only asks for metrics /metrics serves."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_every_metric_the_dashboard_queries_is_served(client, busy_world):
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    queried = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bgangway_\w+", target["expr"])
    }
    served = set(re.findall(r"^# TYPE (gangway_\w+)", client.get("/metrics").content.decode(), re.M))
    served |= {name + "_total" for name in served}

    assert queried and sorted(queried - served) == []
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


def test_the_gpus_in_use_panel_compares_the_capacity_with_what_uses_it():
    """Beside the schedulable nodes' capacity, the GPUs jobs hold on those nodes: never the teams' own figures,
    which count their jobs on cordoned nodes too and could show more in use than there is (during a drain)."""
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    (panel,) = [panel for panel in dashboard["panels"]
                if any('kind="capacity"' in target["expr"] for target in panel["targets"])]  # fmt: skip
    exprs = {target["legendFormat"]: target["expr"] for target in panel["targets"]}
    assert exprs == {"in use": 'max(gangway_cluster_gpus{kind="used"})',
                     "capacity": 'max(gangway_cluster_gpus{kind="capacity"})'}  # fmt: skip
