from django.apps import AppConfig


class CronAppConfig(AppConfig):
    name = "cron_app"
    verbose_name = "Scheduled jobs"
