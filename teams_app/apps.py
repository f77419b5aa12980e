from django.apps import AppConfig


class TeamsAppConfig(AppConfig):
    name = "teams_app"
    verbose_name = "Teams and sign-in"

    def ready(self) -> None:
        # What the audit log records (django-auditlog's registry), once the models are loaded.
        from teams_app import audit

        audit.register()
