"""Recording admin edits: who changed a team's settings, when, and the values before and after."""

from __future__ import annotations

from django.db import models
from django.forms.models import model_to_dict

from tenants.models import AuditEntry, Team

# Fields never copied into an audit entry (a token's digest is as good as a password).
HIDDEN = {"digest"}


def snapshot(obj: models.Model | None) -> dict:
    """The row's fields as JSON-ready values ({} for none)."""
    if obj is None or obj.pk is None:
        return {}
    data = model_to_dict(obj)
    return {key: _plain(value) for key, value in data.items() if key not in HIDDEN}


def _plain(value):
    if isinstance(value, models.Model):
        return str(value)
    if isinstance(value, (list, tuple, set)):
        return sorted(str(item) for item in value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def team_of(obj: models.Model) -> Team | None:
    if isinstance(obj, Team):
        return obj
    return getattr(obj, "team", None)


def record(*, actor, obj: models.Model, before: dict, after: dict, verb: str) -> AuditEntry | None:
    """An audit entry for a change of `obj`; None when nothing changed."""
    if before == after:
        return None
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    subject = obj._meta.model_name
    detail = ", ".join(f"{key} {before.get(key)!r} -> {after.get(key)!r}" for key in changed) if verb == "changed" else ""
    what = str(obj._meta.verbose_name)  # only its first letter raised: "GPU type a100 added."
    summary = f"{what[:1].upper()}{what[1:]} {obj} {verb}" + (f": {detail}" if detail else "") + "."
    team = team_of(obj)
    return AuditEntry.objects.create(actor=actor, team=team if team and team.pk else None, subject=subject,
                                     before=before, after=after, summary=summary[:2000])  # fmt: skip
