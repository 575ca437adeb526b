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
