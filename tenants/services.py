"""Writes on teams: quota changes, recorded with who made them and what they were before."""

from __future__ import annotations

from django.db import transaction

from portal import triggers
from tenants.models import AuditEntry, Quota, Resource, Team

QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")


def quota_values(team: Team) -> dict[str, dict]:
    """The team's quotas as {resource: {nominal, borrowing_limit, lending_limit}}, plus its weight."""
    values = {q.resource: {f: getattr(q, f) for f in QUOTA_FIELDS} for q in team.quotas.all()}
    return {"weight": team.weight, **values}


def quota_update(*, team: Team, quotas: dict[str, dict], weight: float | None = None, actor=None) -> AuditEntry | None:
    """Save new quotas (and weight) for `team`; returns the audit entry, or None when nothing changed.

    `quotas` maps a resource to its three limits; a resource mapped to None
    loses its quota row (it is then limited by node capacity only).
    """
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=team.pk)
        before = quota_values(team)
        for resource, values in quotas.items():
            if resource not in Resource.values:
                raise ValueError(f"Unknown resource {resource!r}; the resources are {', '.join(Resource.values)}.")
            if values is None:
                Quota.objects.filter(team=team, resource=resource).delete()
                continue
            Quota.objects.update_or_create(team=team, resource=resource,
                                           defaults={f: values.get(f) for f in QUOTA_FIELDS})  # fmt: skip
        if weight is not None and weight != team.weight:
            team.weight = weight
            team.save(update_fields=["weight"])
        after = quota_values(team)
        if after == before:
            return None
        entry = AuditEntry.objects.create(actor=actor, team=team, subject="quota", before=before, after=after,
                                          summary=_describe(team, before, after))  # fmt: skip
        transaction.on_commit(admission_inputs_changed)
    return entry


def _describe(team: Team, before: dict, after: dict) -> str:
    parts = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key == "weight":
            parts.append(f"weight {old} -> {new}")
            continue
        for field in QUOTA_FIELDS:
            a, b = (old or {}).get(field), (new or {}).get(field)
            if a != b:
                parts.append(f"{key} {field.replace('_', ' ')} {_show(a)} -> {_show(b)}")
    return f"Quota of team {team.slug}: " + "; ".join(parts) + "."


def _show(value) -> str:
    return "no limit" if value is None else str(value)


def admission_inputs_changed() -> None:
    """Asks for an admission cycle and a tenant sync now, after a change to
    what admission reads (quotas, weights, tiers), instead of at the next beat."""
    triggers.trigger(triggers.ADMISSION_CYCLE)
    triggers.trigger(triggers.SYNC_TENANTS)
