"""Template context every page gets."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from core.durations import duration
from scheduling.records import failing_streak, stalled_for
from tenants.permissions import is_admin


def loop_health(request) -> dict:
    """For staff: how many admission cycles in a row have failed, once that reaches the
    readiness limit, or for how long the loop has run none (`records.stalled_for`): the
    banner on every page; nothing for anyone else, and no query."""
    user = getattr(request, "user", None)
    if user is None or not is_admin(user):
        return {}
    limit = settings.CYCLE_FAILURES_BEFORE_UNREADY
    streak = failing_streak(limit)
    if streak >= limit:
        return {"cycles_failing": streak}
    quiet = stalled_for(timezone.now())
    return {"loop_stalled_for": duration(quiet)} if quiet is not None else {}
