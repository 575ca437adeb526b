from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Models load before ready(), so the receivers (which read them) can be imported only now.
        from django.core import checks

        from jobs.transitions import job_moved
        from notifications.checks import email_deadline_is_valid, webhook_deadline_is_valid
        from notifications.receivers import enqueue_on_commit

        job_moved.connect(enqueue_on_commit, dispatch_uid="notifications.enqueue_on_commit")
        checks.register(webhook_deadline_is_valid)
        checks.register(email_deadline_is_valid)
