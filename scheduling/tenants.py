"""The tenants as the cluster port sees them: teams with quotas, tiers, and the cluster's GPU types."""

from __future__ import annotations

from scheduling.cluster.base import TenantTeam, TenantTier, Tenants
from scheduling.gpu_types import known_types
from scheduling.policy.types import type_of_key
from scheduling.snapshot import quota_limits, teams_with_quotas
from tenants.models import PriorityTier


def tenants_from_database() -> Tenants:
    types = known_types()
    names = tuple(t.name for t in types)
    teams = []
    for team in teams_with_quotas():
        limits = quota_limits(team)
        nominal, borrowing_limit = cluster_quota(limits["nominal"], limits["borrowing_limit"], names)
        teams.append(
            TenantTeam(
                slug=team.slug,
                nominal=nominal,
                borrowing_limit=borrowing_limit,
                per_replica_max=limits["per_replica_max"],
                default_request=limits["replica_defaults"],
                weight=team.weight,
                type_nominal={type_of_key(key): amount for key, amount in limits["nominal"].items()
                              if type_of_key(key) is not None},
            )
        )
    tiers = tuple(TenantTier(name=t.name, value=t.value, preemptible=t.preemptible) for t in PriorityTier.objects.all())
    return Tenants(teams=tuple(teams), tiers=tiers, gpu_types=types)


def cluster_quota(
    nominal: dict[str, int], borrowing_limit: dict[str, int], types: tuple[str, ...]
) -> tuple[dict[str, int], dict[str, int]]:
    """Returns a team's (nominal, borrowing limit) as the cluster counts them: by `nvidia.com/gpu`, whatever the type.

    On a cluster with GPU types (`types`, or a quota naming `gpu:<type>`) the team's `gpu` is the
    sum over its types. Its nominal is the sum of theirs. Its borrowing limit, which with nominal
    makes the ResourceQuota's and the Volcano queue's ceiling, is the sum of theirs only when the
    policy bounds every type: a type the team's quota names without a borrowing limit, or does not
    name at all (it may borrow that type without limit, see `policy.types`), leaves its GPUs
    without a ceiling, as a resource without a borrowing limit has none today. A plain `gpu` row
    there counts for nothing, as in the policy. Without types both come back as they are.
    """
    typed = {type_of_key(key): amount for key, amount in nominal.items() if type_of_key(key) is not None}
    if not types and not typed:
        return dict(nominal), dict(borrowing_limit)
    out_nominal = {key: amount for key, amount in nominal.items() if key != "gpu" and type_of_key(key) is None}
    out_borrowing = {key: amount for key, amount in borrowing_limit.items() if key != "gpu" and type_of_key(key) is None}
    if typed:
        limits = {type_of_key(key): amount for key, amount in borrowing_limit.items() if type_of_key(key) is not None}
        out_nominal["gpu"] = sum(typed.values())
        if all(name in typed and name in limits for name in set(types) | set(typed)):
            out_borrowing["gpu"] = sum(limits[name] for name in typed)
    return out_nominal, out_borrowing
