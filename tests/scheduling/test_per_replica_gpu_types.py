"""A team's per-replica GPU limit with GPU types: one figure for all its types (a LimitRange limits
nvidia.com/gpu per pod whatever the model), the smallest its typed quota rows set."""

from __future__ import annotations

import pytest

from jobs.services import NeverFits
from scheduling.snapshot import policy_team, quota_limits
from tenants.models import Quota


def test_the_smallest_typed_limit_is_the_teams_gpu_limit(gpu_types, maps):
    Quota.objects.filter(team=maps, resource="gpu:a100").update(max_per_replica=4)
    assert quota_limits(maps)["per_replica_max"] == {"gpu": 4}
    assert policy_team(maps).per_replica_max == {"gpu": 4}


def test_a_replica_above_it_is_refused_whatever_type_it_asks_for(gpu_types, maps, submit, cycle):
    cycle()  # R10 at submission reads the nodes the last cycle saw
    Quota.objects.filter(team=maps, resource="gpu:a100").update(max_per_replica=4)
    # One limit, the same on both types: said once, naming both.
    with pytest.raises(NeverFits, match=r"^l4, a100: A replica asks for 6 GPUs; team maps allows at most 4 GPUs per "
                                        r"replica \(per_replica_max\)\.$"):
        submit(replicas=[{"role": "Worker", "count": 1, "gpu": 6}])


def test_without_typed_limits_the_team_has_no_gpu_limit(gpu_types, maps):
    Quota.objects.filter(team=maps).update(max_per_replica=None)
    Quota.objects.create(team=maps, resource="cpu", nominal=64000, max_per_replica=8000)
    assert quota_limits(maps)["per_replica_max"] == {"cpu": 8000}


def test_without_types_the_gpu_row_gives_it_as_before(maps):
    assert quota_limits(maps)["per_replica_max"] == {"gpu": 8}
