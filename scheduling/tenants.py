"""The tenants as the cluster port sees them: teams with quotas, tiers, and the cluster's GPU types."""

from __future__ import annotations

from scheduling.cluster.base import TenantTeam, TenantTier, Tenants
from scheduling.gpu_types import known_types
from scheduling.snapshot import quota_limits, teams_with_quotas
from tenants.models import PriorityTier


def tenants_from_database() -> Tenants:
    teams = []
    for team in teams_with_quotas():
        limits = quota_limits(team)
        teams.append(
            TenantTeam(
                slug=team.slug,
                nominal=limits["nominal"],
                borrowing_limit=limits["borrowing_limit"],
                per_replica_max=limits["per_replica_max"],
                default_request=limits["replica_defaults"],
                weight=team.weight,
            )
        )
    tiers = tuple(TenantTier(name=t.name, value=t.value, preemptible=t.preemptible) for t in PriorityTier.objects.all())
    return Tenants(teams=tuple(teams), tiers=tiers, gpu_types=known_types())
