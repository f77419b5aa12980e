from django.apps import AppConfig


class CronAppConfig(AppConfig):
    name = "cron_app"
    verbose_name = "Scheduled jobs"

    def ready(self) -> None:
        from cron_app import schedules  # noqa: F401  (connects the schedule to its job)
