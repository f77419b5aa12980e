"""`manage.py ensure_login`: make sure somebody can log in to a fresh site."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create a superuser if none exists: from DJANGO_SUPERUSER_USERNAME and "
        "DJANGO_SUPERUSER_PASSWORD, or with a generated password printed once."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        username = settings.DJANGO_SUPERUSER_USERNAME or "admin"
        password = settings.DJANGO_SUPERUSER_PASSWORD
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        user = User.objects.filter(username=username).first()
        if user is None:
            User.objects.create_superuser(username=username, email="", password=password)
        else:
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save()
        if generated:
            self.stdout.write(
                self.style.WARNING(
                    f"Created the login {username!r} with password {password!r}. "
                    "It is shown only this once: change it in the admin."
                )
            )
        else:
            self.stdout.write(f"Created the login {username!r}.")
