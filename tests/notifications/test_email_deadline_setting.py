"""EMAIL_DEADLINE, the seconds an e-mail's whole SMTP session may take: 30 unless set, and a bad value stops the
service when it starts (Django's system checks), naming the setting and what it may be, instead of failing
every e-mail the worker later sends."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings

from notifications import deadlines


def deadline_errors() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks() if message.id == "notifications.E002"]


@pytest.mark.parametrize("deadline", [0, -1, 51, "10", True, float("nan")])
def test_an_email_deadline_not_above_0_and_at_most_half_the_soft_time_limit_fails_the_checks(deadline):
    with override_settings(CELERY_TASK_SOFT_TIME_LIMIT=100, EMAIL_DEADLINE=deadline):
        errors = deadline_errors()
    assert [error.level for error in errors] == [checks.ERROR]
    assert errors[0].msg == ("EMAIL_DEADLINE must be a number of seconds above 0 and at most half of "
                             f"CELERY_TASK_SOFT_TIME_LIMIT (100 s), not {deadline!r}.")  # fmt: skip


def test_an_email_deadline_within_its_range_passes_the_checks():
    with override_settings(CELERY_TASK_SOFT_TIME_LIMIT=100, EMAIL_DEADLINE=50):
        assert deadline_errors() == []
        assert deadlines.email_deadline() == 50.0


def test_the_email_deadline_is_thirty_seconds_unless_set(settings):
    del settings.EMAIL_DEADLINE
    assert deadlines.email_deadline() == 30.0
