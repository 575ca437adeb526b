"""Team GPU figures: the plan computes them, the cycle stores them, and the dashboard, the team
pages, the API, /metrics and usage samples all show those same figures."""

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from scheduling.cluster.base import ClusterUnavailable
from scheduling.models import Cycle, UsageSample
from scheduling.selectors import team_usage
from tests.conftest import make_team

pytestmark = pytest.mark.django_db


@pytest.fixture
def lenders(tiers, maps):
    """maps (8 nominal) borrows 4 of two idle teams' 4 each on two nodes of 8; vision lends
    nothing (lending_limit 0), so all of it comes from search."""
    return {"vision": make_team("vision", tiers, gpu=4, lending_limit=0), "search": make_team("search", tiers, gpu=4)}


def _borrow_four(submit, cycle):
    submit(name="borrower", replicas=[{"role": "Worker", "count": 3, "gpu": 4}])  # 12 of 8 nominal
    cycle()


def _metrics(client) -> dict:
    text = client.get("/metrics").content.decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_team_with_lending_limit_0_shows_no_lending_anywhere(lenders, submit, cycle, client, staff):
    _borrow_four(submit, cycle)
    api = APIClient()
    api.force_authenticate(staff)

    stored = {team["team"]: team for team in Cycle.objects.latest().gpu_usage}
    assert (stored["vision"]["lent"], stored["search"]["lent"]) == (0, 4)
    assert stored["maps"]["borrowed_from"] == {"search": 4}
    cluster = {team["team"]: team for team in api.get("/api/v1/cluster/").json()["teams"]}
    assert (cluster["vision"]["lent"], cluster["vision"]["idle"], cluster["search"]["lent"]) == (0, 4, 4)
    teams = {team["slug"]: team["usage"]["gpu"] for team in api.get("/api/v1/teams/").json()["results"]}
    assert (teams["vision"]["lent"], teams["search"]["lent"], teams["maps"]["borrowed"]) == (0, 4, 4)
    metrics = _metrics(client)
    assert metrics[("gangway_team_gpus_lent", (("team", "vision"),))] == 0
    assert metrics[("gangway_team_gpus_lent", (("team", "search"),))] == 4
    client.force_login(staff)
    dashboard = client.get("/").content.decode()
    assert "vision: 0 of 4 nominal GPUs in use, 0 borrowed, 0 lent, 4 idle" in dashboard
    assert "search: 0 of 4 nominal GPUs in use, 0 borrowed, 4 lent, 0 idle" in dashboard
    page = client.get("/teams/maps/").content.decode()
    assert 'href="/teams/search/"' in page and 'href="/teams/vision/"' not in page


def test_usage_samples_record_the_figures_the_plan_gave(lenders, submit, cycle, maps):
    _borrow_four(submit, cycle)
    sample = UsageSample.objects.get(team=maps)
    assert (sample.gpu_used, sample.gpu_borrowed, sample.gpu_nominal, sample.gpu_waiting) == (12, 4, 8, 0)


def test_a_cycle_that_cannot_reach_the_cluster_keeps_the_last_figures(lenders, submit, cycle, cluster, clock):
    _borrow_four(submit, cycle)

    class Down(type(cluster)):
        def nodes(self):
            raise ClusterUnavailable("connection refused")

    clock.tick(5)
    cycle(on=Down(clock=clock, seed=1, failure_rate=0))
    assert Cycle.objects.latest().gpu_usage is None
    assert {u.slug: u.lent for u in team_usage()} == {"maps": 0, "search": 4, "vision": 0}
