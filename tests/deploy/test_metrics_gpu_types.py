"""/metrics on a cluster with GPU types: gauges per team and type, and each type's capacity, under
their own names so the team totals stay as they were; none of them without types."""

import pytest

from tests.deploy.test_metrics import scrape

pytestmark = pytest.mark.django_db


def _typed(metrics, kind, team, gpu_type):
    return metrics[(f"gangway_team_type_gpus_{kind}", (("gpu_type", gpu_type), ("team", team)))]


def test_it_reports_each_teams_gpus_per_type_beside_its_totals(client, maps_on_a100):
    metrics = scrape(client)
    assert (_typed(metrics, "used", "maps", "a100"), _typed(metrics, "borrowed", "maps", "a100")) == (6, 2)
    assert _typed(metrics, "nominal", "maps", "l4") == 4 and _typed(metrics, "lent", "vision", "a100") == 2
    assert metrics[("gangway_team_gpus_used", (("team", "maps"),))] == 6
    assert metrics[("gangway_team_gpus_nominal", (("team", "maps"),))] == 8
    for kind in ("used", "nominal", "borrowed", "lent"):
        for team in ("maps", "vision"):
            total = metrics[(f"gangway_team_gpus_{kind}", (("team", team),))]
            assert total == sum(_typed(metrics, kind, team, t) for t in ("l4", "a100"))


def test_it_reports_each_types_capacity(client, maps_on_a100):
    metrics = scrape(client)
    assert metrics[("gangway_cluster_type_gpus", (("gpu_type", "a100"), ("kind", "capacity")))] == 8
    assert metrics[("gangway_cluster_type_gpus", (("gpu_type", "l4"), ("kind", "outside")))] == 0
    assert metrics[("gangway_cluster_gpus", (("kind", "capacity"),))] == 16


def test_without_types_there_is_no_gauge_per_type(client, submit, cycle):
    submit()
    cycle()
    text = client.get("/metrics").content.decode()
    assert "gangway_team_gpus_used" in text
    assert "gpu_type" not in text and "gangway_team_type_gpus" not in text
