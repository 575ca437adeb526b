"""A bad WEBHOOK_DEADLINE stops the service when it starts (Django's system checks), naming the setting and
what it may be, instead of failing every webhook the worker later sends."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings


def deadline_errors() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks() if message.id == "notifications.E001"]


@pytest.mark.parametrize("deadline", [0, -1, 51, "10", True, float("nan")])
def test_a_webhook_deadline_not_above_0_and_at_most_half_the_soft_time_limit_fails_the_checks(deadline):
    with override_settings(CELERY_TASK_SOFT_TIME_LIMIT=100, WEBHOOK_DEADLINE=deadline):
        errors = deadline_errors()
    assert [error.level for error in errors] == [checks.ERROR]
    assert errors[0].msg == ("WEBHOOK_DEADLINE must be a number of seconds above 0 and at most half of "
                             f"CELERY_TASK_SOFT_TIME_LIMIT (100 s), not {deadline!r}.")  # fmt: skip


@pytest.mark.parametrize("deadline", [0.5, 5, 50])
def test_a_webhook_deadline_within_its_range_passes_the_checks(deadline):
    with override_settings(CELERY_TASK_SOFT_TIME_LIMIT=100, WEBHOOK_DEADLINE=deadline):
        assert deadline_errors() == []
