"""OIDC_GROUP_MAP: which identity-provider group gives which role in which team, or staff.

Parsed by the settings at start-up, so a malformed map stops the portal naming the entry;
that runs before any model loads, so this module imports none (single sign-on itself is
in identity.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from tenants.roles import Role

STAFF = "staff"


@dataclass(frozen=True)
class Grant:
    """What one identity-provider group gives: a role in a team, or staff."""

    team: str  # "" for staff
    role: str  # member | lead | staff


def parse_group_map(text: str) -> dict[str, Grant]:
    """Parse OIDC_GROUP_MAP: "group=team:role,..." with role member or lead, or "group=staff".

    Raises ImproperlyConfigured naming the entry that does not parse.
    """
    grants = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        group, _, target = entry.partition("=")
        team, _, role = target.partition(":")
        if target == STAFF:
            grants[group.strip()] = Grant("", STAFF)
        elif group and team and role in Role.values:
            grants[group.strip()] = Grant(team.strip(), role)
        else:
            raise ImproperlyConfigured(
                f"OIDC_GROUP_MAP entry {entry!r} must be 'group=team:member', 'group=team:lead' or 'group=staff'."
            )
    return grants
