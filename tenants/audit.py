"""Recording admin edits: who changed a team's settings, when, and the values before and after."""

from __future__ import annotations

from django.db import models
from django.forms.models import model_to_dict

from tenants.admin_display import quantity_text
from tenants.limit_words import UNSET
from tenants.models import AuditEntry, Quota, Resource, Team
from tenants.quota_conflicts import figure_text

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


def _shown(obj: models.Model, row: dict, key: str) -> str:
    """One value of a row's snapshot as its entry writes it: a quota's figures as the audit of a quota change
    writes them, in the row's resource's unit or `limit_words`' words ("64 CPUs", "no limit"), a team's sweep
    cap in GPUs, a reference to another row by that row's name ("'standard'", the snapshot keeping its id);
    any other value as Python writes it ("'lead'", "None")."""
    value = row.get(key)
    if isinstance(obj, Quota) and key in UNSET:
        return figure_text(row.get("resource", ""), key, value)
    if isinstance(obj, Team) and key == "sweep_gpu_cap" and value is not None:
        return quantity_text(Resource.GPU, value)
    field = next((field for field in obj._meta.concrete_fields if field.name == key), None)
    if isinstance(field, models.ForeignKey) and value is not None:
        related = field.related_model._default_manager.filter(pk=value).first()
        return repr(str(related)) if related is not None else f"#{value} (since deleted)"
    return repr(value)


def _named(obj: models.Model) -> str:
    """The row as its entry names it: its own text, a quota's nominal in its unit ("maps cpu: 64 CPUs")."""
    if isinstance(obj, Quota):
        return f"{obj.team} {obj.resource}: {figure_text(obj.resource, 'nominal', obj.nominal)}"
    return str(obj)


def record(*, actor, obj: models.Model, before: dict, after: dict, verb: str) -> AuditEntry | None:
    """An audit entry for a change of `obj`; None when nothing changed."""
    if before == after:
        return None
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    subject = obj._meta.model_name
    detail = ""
    if verb == "changed":
        detail = ", ".join(f"{key} {_shown(obj, before, key)} -> {_shown(obj, after, key)}" for key in changed)
    what = str(obj._meta.verbose_name)  # only its first letter raised: "GPU type a100 added."
    summary = f"{what[:1].upper()}{what[1:]} {_named(obj)} {verb}" + (f": {detail}" if detail else "") + "."
    team = team_of(obj)
    return AuditEntry.objects.create(actor=actor, team=team if team and team.pk else None, subject=subject,
                                     before=before, after=after, summary=summary[:2000])  # fmt: skip
