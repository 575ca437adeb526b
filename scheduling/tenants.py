"""The tenants as the cluster port sees them: teams with quotas, and tiers."""

from __future__ import annotations

from scheduling.cluster.base import TenantTeam, TenantTier, Tenants
from scheduling.snapshot import teams_with_quotas
from tenants.models import PriorityTier


def tenants_from_database() -> Tenants:
    teams = []
    for team in teams_with_quotas():
        quotas = list(team.quotas.all())
        teams.append(
            TenantTeam(
                slug=team.slug,
                nominal={q.resource: q.nominal for q in quotas},
                borrowing_limit={q.resource: q.borrowing_limit for q in quotas if q.borrowing_limit is not None},
                per_replica_max={q.resource: q.max_per_replica for q in quotas if q.max_per_replica is not None},
                default_request={q.resource: q.default_per_replica for q in quotas if q.default_per_replica},
                weight=team.weight,
            )
        )
    tiers = tuple(TenantTier(name=t.name, value=t.value, preemptible=t.preemptible) for t in PriorityTier.objects.all())
    return Tenants(teams=tuple(teams), tiers=tiers)
