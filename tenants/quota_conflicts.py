"""Quota edits made from a form loaded earlier: what the form was loaded with, and what changed since.

The quota page and the admin's team and quota forms carry, in a hidden field, the figures they were
loaded with (`QuotaAsRead.token`); the API takes them as `based_on`. A save compares them with the
stored figures under the team's row lock and refuses when they differ (`QuotaChanged`), naming each
change and who made it: a form opened before another admin's change would otherwise post the old
figures back and silently undo it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from django.utils import timezone

from scheduling.policy.types import type_of_key
from tenants.admin_display import quantity_text
from tenants.limit_words import limit_text
from tenants.models import AuditEntry, Team

WEIGHT = "weight"
# The audit subjects whose entries change quota figures: quota rows (the quota page, the API, the
# admin's quota forms, GPU type changes) and teams (the admin's team form holds the weight).
SUBJECTS = ("quota", "team")
FIELDS = ("nominal", "borrowing_limit", "lending_limit", "max_per_replica", "default_per_replica")
ENTRIES_READ = 50  # who made a change is looked for among the team's newest entries since the form was loaded


class QuotaChanged(Exception):
    """The stored quota differs from the figures an edit started from; nothing was saved.

    `changes` says what changed since, with who and when where the audit says ("gpu nominal was
    changed from 8 GPUs to 4 GPUs by alice at 10:02 UTC"); `attempted` lists the refused edit as the
    audit words changes ("gpu borrowing limit 8 GPUs -> 0 GPUs"), empty when it changed nothing.
    """

    def __init__(self, changes: str, attempted: list[str] | None = None):
        self.changes, self.attempted = changes, attempted or []
        super().__init__(self.refusal("it was read", "read it again and make your change on it"))

    def refusal(self, since: str, then: str) -> str:
        """The refusal as one sentence: "Since <since>, <changes>; your change (...) was not saved — <then>."."""
        refused = f"your change ({'; '.join(self.attempted)}) was not saved" if self.attempted else "nothing was saved"
        return f"Since {since}, {self.changes}; {refused} — {then}."


@dataclass(frozen=True)
class QuotaAsRead:
    """A team's quota figures as a form or a client read them, in `services.quota_values`' shape
    ({"weight": 1.0, "gpu": {"nominal": 8, ...}}; one resource's row alone for an admin quota row,
    without the weight when it was not read); `seen` is the team's newest audit entry then, so only
    later entries are named as the changes' authors (None: any entry may be)."""

    figures: dict
    seen: int | None = None

    @classmethod
    def now(cls, team: Team, figures: dict) -> QuotaAsRead:
        """`figures`, just read from the database, as read now."""
        newest = AuditEntry.objects.filter(team=team, subject__in=SUBJECTS).order_by("-id").values_list("id", flat=True)
        return cls(figures=figures, seen=newest.first() or 0)

    def token(self) -> str:
        """The text a form carries in its hidden field."""
        return json.dumps({"figures": self.figures, "seen": self.seen}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | None) -> QuotaAsRead | None:
        """The figures a form's hidden field carries; None when it is empty or not one a form was given."""
        try:
            data = json.loads(text or "")
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("figures"), dict):
            return None
        seen, figures = data.get("seen"), data["figures"]
        if seen is not None and not _is_amount(seen):
            return None
        for key, value in figures.items():
            if key == WEIGHT:
                if not _is_number(value):
                    return None
            elif not (isinstance(value, dict) and set(value) <= set(FIELDS)
                      and all(v is None or _is_amount(v) for v in value.values())):  # fmt: skip
                return None
        return cls(figures=figures, seen=seen)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_amount(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def changes_since(team: Team, read: QuotaAsRead, now: dict) -> str:
    """What differs between the figures `read` and the stored ones `now` (same shape), as a phrase
    naming each change and, when an audit entry of the team since `read.seen` made it, who and when
    ("gpu nominal was changed from 8 GPUs to 4 GPUs by alice at 10:02 UTC"); "" when nothing differs.

    The weight is compared only when `read` has it.
    """
    differences = _differences(read.figures, now)
    if not differences:
        return ""
    entries = AuditEntry.objects.filter(team=team, subject__in=SUBJECTS).select_related("actor").order_by("-id")
    if read.seen is not None:
        entries = entries.filter(id__gt=read.seen)
    entries = list(entries[:ENTRIES_READ])
    groups: dict[int | None, tuple[AuditEntry | None, list[tuple]]] = {}  # the changes each entry made, in order
    for key, field, old, new in differences:
        entry = next((e for e in entries if _figure(e.before, key, field) != _figure(e.after, key, field)), None)
        groups.setdefault(entry.pk if entry else None, (entry, []))[1].append(
            (_label(key, field), figure_text(key, field, old), figure_text(key, field, new)))
    phrases = []
    for entry, changes in groups.values():
        said = [f"{label} {'was changed ' if not index else ''}from {old} to {new}"
                for index, (label, old, new) in enumerate(changes)]  # fmt: skip
        text = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
        phrases.append(f"{text} {_by(entry)}" if entry else text)
    return "; ".join(phrases)


def _differences(read: dict, now: dict) -> list[tuple[str, str | None, object, object]]:
    """(key, field, read, now) for each figure that differs; field is None for the weight."""
    found = []
    if WEIGHT in read and read[WEIGHT] != now.get(WEIGHT):
        found.append((WEIGHT, None, read[WEIGHT], now.get(WEIGHT)))
    for key in sorted((set(read) | set(now)) - {WEIGHT}):
        old, new = read.get(key) or {}, now.get(key) or {}
        for field in FIELDS:
            if (field in old or field in new) and old.get(field) != new.get(field):
                found.append((key, field, old.get(field), new.get(field)))
    return found


def _figure(side: dict, key: str, field: str | None):
    """One figure as an audit entry's before or after holds it: in `quota_values`' shape (the quota
    page, the API, GPU type changes), or one row's fields (the admin: a quota's, a team's)."""
    if "resource" in side:  # an admin quota row's snapshot
        return side.get(field) if field and side["resource"] == key else None
    if field is None:
        return side.get(WEIGHT)
    row = side.get(key)
    return row.get(field) if isinstance(row, dict) else None


def _label(key: str, field: str | None) -> str:
    return "the weight" if field is None else f"{resource_text(key)} {field.replace('_', ' ')}"


def figure_text(key: str, field: str | None, value) -> str:
    """One quota figure as the refusal and the audit of a quota change write it: in its resource's unit ("64 CPUs",
    "512 GiB", "8 GPUs" for `key` cpu, memory, gpu or gpu:<type>), its words when not set ("no limit"); the weight
    (`field` None) as it is ("2.0")."""
    if field is None:
        return str(value)
    return limit_text(field, value, lambda amount: quantity_text(key, amount))


def resource_text(key: str) -> str:
    """A quota row's resource as the refusal and the audit of a quota change name it: a GPU type's as people
    read it ("l4 GPUs" for gpu:l4, where its key was written), any other by its key ("gpu", "cpu", "memory")."""
    gpu_type = type_of_key(key)
    return key if gpu_type is None else f"{gpu_type} GPUs"


def _by(entry: AuditEntry) -> str:
    """ "by alice at 10:02 UTC" (with the day when it was not today), in the zone pages show."""
    who = entry.actor.username if entry.actor else "system"
    at = timezone.localtime(entry.at)
    when = f"{at:%H:%M %Z}" if at.date() == timezone.localdate() else f"{at:%a %d %b %H:%M %Z}"
    return f"by {who} at {when}"
