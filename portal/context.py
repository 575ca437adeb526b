"""Template context every page gets."""

from __future__ import annotations

from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from core.durations import duration
from scheduling.records import loop_trouble
from tenants.permissions import can_submit_any, is_admin


def loop_health(request) -> dict:
    """For staff: how many admission cycles in a row have failed, once that reaches the
    readiness limit, or for how long the loop has run none (`records.loop_trouble`): the
    banner on every page; nothing for anyone else, and no query."""
    user = getattr(request, "user", None)
    if user is None or not is_admin(user):
        return {}
    trouble = loop_trouble(timezone.now())
    if trouble.failing_too_long:
        return {"cycles_failing": trouble.failing}
    return {"loop_stalled_for": duration(trouble.stalled_for)} if trouble.stalled_for is not None else {}


def submitting(request) -> dict:
    """`may_submit`: whether the signed-in user may submit a job for some team (`can_submit_any`), read only
    when a page asks (the header's "+ Submit job", a page's "Submit a job"): one in no team is told whom to
    ask instead of being sent to a form that cannot be sent. Nothing for a visitor not signed in."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"may_submit": SimpleLazyObject(lambda: can_submit_any(user))}
