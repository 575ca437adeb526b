from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        # Models load before ready(), so the preview (which reads them) can be imported only now.
        from jobs.selectors import open_jobs_naming_gpu_type
        from jobs.services import judge_fit_with
        from scheduling.preview import rejection_for
        from tenants.services import find_gpu_type_users_with

        judge_fit_with(rejection_for)
        # A GPU type that open jobs name may be neither renamed nor deleted (tenants cannot read jobs).
        find_gpu_type_users_with(open_jobs_naming_gpu_type)
