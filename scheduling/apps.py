from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        # Models load before ready(), so the preview (which reads them) can be imported only now.
        from jobs.services import judge_fit_with
        from scheduling.preview import rejection_for

        judge_fit_with(rejection_for)
