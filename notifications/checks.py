"""Settings of the notifications checked when any process starts (`manage.py check`, migrate, the schema wait
the workers run first, and gunicorn's master before the web's workers start), so a bad value stops the service
there instead of failing every delivery it later tries."""

from __future__ import annotations

from django.core.checks import Error
from django.core.exceptions import ImproperlyConfigured

from notifications.deadlines import email_deadline, webhook_deadline


def webhook_deadline_is_valid(app_configs=None, **kwargs) -> list[Error]:
    """WEBHOOK_DEADLINE is above 0 and at most half of CELERY_TASK_SOFT_TIME_LIMIT (`webhook_deadline`)."""
    try:
        webhook_deadline()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="notifications.E001")]
    return []


def email_deadline_is_valid(app_configs=None, **kwargs) -> list[Error]:
    """EMAIL_DEADLINE is above 0 and at most half of CELERY_TASK_SOFT_TIME_LIMIT (`email_deadline`)."""
    try:
        email_deadline()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="notifications.E002")]
    return []
