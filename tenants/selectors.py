"""Reads on teams: who belongs where, which tiers a team may use."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from portal.compiled import CompiledQuery, columns, instance
from tenants.models import GpuType, Membership, PriorityTier, Resource, Team
from tenants.permissions import visible_teams


def teams_for(user) -> QuerySet[Team]:
    """The teams a user may see: all of them for staff, else their own (tenants.permissions)."""
    return visible_teams(user)


def role_in(user, team: Team) -> str | None:
    """The user's role in the team, or None for an outsider."""
    return Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()


def tiers_of(team: Team) -> list[PriorityTier]:
    """The tiers the team may use, in tier order: prefetched ones when there are, else read (SQL built once)."""
    prefetched = getattr(team, "_prefetched_objects_cache", {}).get("tiers")
    if prefetched is not None:
        return list(prefetched)
    return [instance(PriorityTier, row) for row in _TIERS_OF_TEAM(team.pk)]


# -7: a team id no row has, standing for the real one while the SQL is built.
_TIERS_OF_TEAM = CompiledQuery(lambda team: PriorityTier.objects.filter(teams=team).values_list(*columns(PriorityTier)), -7)


def sweep_tier(team: Team) -> PriorityTier | None:
    """The tier a Katib sweep's trials get unless they name one: the team's sweep tier while the team may
    use it, else its lowest (search low, final training high); None when the team may use no tier."""
    allowed = tiers_of(team)
    chosen = next((tier for tier in allowed if tier.pk == team.sweep_tier_id), None)
    return chosen or min(allowed, key=lambda tier: tier.value, default=None)


def tier_for(team: Team, name: str) -> tuple[PriorityTier | None, str]:
    """The tier a job of `team` gets for the requested `name` ("" = the default).

    Returns (tier, "") or (None, a sentence saying what is allowed).
    """
    allowed = tiers_of(team)
    names = ", ".join(tier.name for tier in allowed) or "none (ask an admin)"
    if not name:
        default = next((tier for tier in allowed if tier.pk == team.default_tier_id), None)
        if default is not None:  # the row just read: no query for team.default_tier
            return default, ""
        if allowed:
            return min(allowed, key=lambda tier: tier.value), ""
        return None, f"Team {team.slug} may use no tier yet; ask an admin to allow one."
    for tier in allowed:
        if tier.name == name:
            return tier, ""
    return None, f"Team {team.slug} may not use tier {name!r}; it may use {names}."


def get_team_to_view(user, slug: str) -> Team:
    """Any team, for its read-only page: every signed-in user sees every team's usage, quota and queue.

    Raises Http404 for a slug no team has. What only members may read (job
    details, logs, tokens) stays behind `tenants.permissions.can_view` and the job lookups.
    """
    team = Team.objects.filter(slug=slug).prefetch_related("tiers", "quotas").first()
    if team is None:
        raise Http404("No such team.")
    return team


def checkpoint_claim_of(slug: str) -> str:
    """The checkpoint claim of the team of `slug`; "" when it has none or there is no such team."""
    return Team.objects.filter(slug=slug).values_list("checkpoint_claim", flat=True).first() or ""


def gpu_types() -> list[GpuType]:
    """The cluster's GPU types, cheapest first; empty on a cluster whose GPUs are of one kind."""
    return list(GpuType.objects.order_by("order", "name"))


def quota_resources() -> list[str]:
    """The resources a team's quota may name: gpu, cpu and memory, with gpu split into `gpu:<type>`
    per GPU type once the cluster has types."""
    typed = [gpu_type.resource for gpu_type in gpu_types()]
    return [*(typed or [Resource.GPU]), Resource.CPU, Resource.MEMORY]
