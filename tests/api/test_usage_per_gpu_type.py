"""The teams and cluster API on a cluster with GPU types: each usage gives its figures per type
(`by_type`) beside the totals, which stay as they were; without types there is no `by_type`."""

import pytest

from jobs.models import Job
from tests.api.conftest import PERSONAS
from tests.api.test_teams import TEAM_STATUS

FIGURES = ("nominal", "used", "within", "borrowed", "lent", "idle", "waiting")


@pytest.fixture
def maps_on_a100(gpu_types, submit, cycle):
    """maps runs 6 a100 GPUs: 4 nominal + 2 borrowed from vision's idle a100."""
    job = submit(name="big", replicas=[{"role": "Worker", "count": 1, "gpu": 6}])
    Job.objects.filter(pk=job.pk).update(gpu_type=["a100"])
    cycle()


def test_a_teams_usage_gives_its_figures_of_each_type(as_persona, maps_on_a100):
    usage = as_persona("member").get("/api/v1/teams/maps/").json()["usage"]["gpu"]
    assert list(usage["by_type"]) == ["l4", "a100"]
    a100 = usage["by_type"]["a100"]
    assert (a100["used"], a100["within"], a100["borrowed"], a100["borrowing_limit"]) == (6, 4, 2, 4)
    assert "by_type" not in a100
    for field in FIGURES:
        assert usage[field] == sum(of_type[field] for of_type in usage["by_type"].values())
    assert usage["borrowing_limit"] == 8


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_figures_per_type_follow_the_teams_access(as_persona, maps_on_a100, persona):
    response = as_persona(persona).get("/api/v1/teams/maps/")
    assert response.status_code == TEAM_STATUS[persona]
    if response.status_code == 200:
        assert response.json()["usage"]["gpu"]["by_type"]["a100"]["used"] == 6


def test_the_cluster_gives_each_types_gpus_and_each_teams_figures_of_them(as_persona, maps_on_a100):
    body = as_persona("maps_token").get("/api/v1/cluster/").json()
    apart = {"unschedulable": 0, "unschedulable_used": 0}
    assert body["by_type"] == {"l4": {"capacity": 8, "used": 0, "in_use": 0, "outside": 0, "free": 8, **apart},
                               "a100": {"capacity": 8, "used": 6, "in_use": 6, "outside": 0, "free": 2, **apart}}
    vision = next(team for team in body["teams"] if team["team"] == "vision")
    assert vision["by_type"]["a100"]["lent"] == 2 and vision["lent"] == 2


def test_without_types_the_usage_has_no_by_type(as_persona, submit, cycle):
    submit()
    cycle()
    assert "by_type" not in as_persona("member").get("/api/v1/teams/maps/").json()["usage"]["gpu"]
    body = as_persona("member").get("/api/v1/cluster/").json()
    assert "by_type" not in body and all("by_type" not in team for team in body["teams"])
