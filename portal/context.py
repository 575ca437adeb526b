"""Template context every page gets."""

from __future__ import annotations

from django.conf import settings

from scheduling.records import failing_streak
from tenants.permissions import is_admin


def loop_health(request) -> dict:
    """For staff: how many admission cycles in a row have failed, once that reaches the
    readiness limit (the banner on every page); nothing for anyone else, and no query."""
    user = getattr(request, "user", None)
    if user is None or not is_admin(user):
        return {}
    limit = settings.CYCLE_FAILURES_BEFORE_UNREADY
    streak = failing_streak(limit)
    return {"cycles_failing": streak} if streak >= limit else {}
