"""A team's ResourceQuota and Volcano queue on a cluster with GPU types: `nvidia.com/gpu` counts its GPUs of
every type, and its ceiling is the sum of the types' only when the policy bounds every type."""

from __future__ import annotations

import pytest

from scheduling.cluster import manifests
from scheduling.tenants import cluster_quota, tenants_from_database
from tenants.models import Quota

CASES = [
    pytest.param({"gpu": 8, "cpu": 64000}, {"gpu": 4}, (), {"gpu": 8, "cpu": 64000}, {"gpu": 4},
                 id="without types the quota is as it always was"),
    pytest.param({"gpu:a100": 4, "gpu:l4": 16, "cpu": 64000}, {"gpu:a100": 2, "gpu:l4": 0, "cpu": 0}, ("l4", "a100"),
                 {"gpu": 20, "cpu": 64000}, {"gpu": 2, "cpu": 0},
                 id="nominal and borrowing limit are each the sum over the types"),
    pytest.param({"gpu:a100": 4, "gpu:l4": 16}, {"gpu:a100": 2}, ("l4", "a100"), {"gpu": 20}, {},
                 id="a type without a borrowing limit leaves the gpus without a ceiling"),
    pytest.param({"gpu:a100": 4}, {"gpu:a100": 2}, ("l4", "a100"), {"gpu": 4}, {},
                 id="a type the team does not name may be borrowed without limit so no ceiling"),
    pytest.param({"gpu": 8, "cpu": 1000}, {"gpu": 4}, ("l4", "a100"), {"cpu": 1000}, {},
                 id="a plain gpu row on a cluster with types counts for nothing as in the policy"),
    pytest.param({"gpu:a100": 4}, {"gpu:a100": 2}, (), {"gpu": 4}, {"gpu": 2},
                 id="a quota naming a type makes a cluster with types even before the type is defined"),
]  # fmt: skip


@pytest.mark.parametrize("nominal, borrowing, types, want_nominal, want_borrowing", CASES)
def test_the_cluster_counts_a_teams_gpus_of_every_type(nominal, borrowing, types, want_nominal, want_borrowing):
    assert cluster_quota(nominal, borrowing, types) == (want_nominal, want_borrowing)


def test_the_team_resource_quota_and_queue_cover_all_its_types(gpu_types, maps):
    tenants = tenants_from_database()
    team = next(team for team in tenants.teams if team.slug == "maps")

    # maps has 4 nominal + 4 borrowable of each of l4 and a100.
    assert manifests.resource_quota(team)["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"
    queue = manifests.volcano_queue(team)["spec"]
    assert (queue["deserved"]["nvidia.com/gpu"], queue["capability"]["nvidia.com/gpu"]) == ("8", "16")
    assert [t.name for t in tenants.gpu_types] == ["l4", "a100"]


def test_a_type_without_a_borrowing_limit_lifts_the_gpu_ceiling_but_keeps_the_others(gpu_types, maps):
    Quota.objects.filter(team=maps, resource="gpu:a100").update(borrowing_limit=None)
    Quota.objects.create(team=maps, resource="cpu", nominal=64000, borrowing_limit=0)
    team = next(team for team in tenants_from_database().teams if team.slug == "maps")

    assert manifests.resource_quota(team)["spec"]["hard"] == {"requests.cpu": "64"}
    assert manifests.volcano_queue(team)["spec"]["deserved"]["nvidia.com/gpu"] == "8"
