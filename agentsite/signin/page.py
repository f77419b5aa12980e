"""The sign-in page (`/accounts/login/`): the identity provider's button when one is
configured, the password form below it, or behind a "Superuser sign-in" disclosure when
passwords are for superusers alone (`AGENT_PASSWORD_LOGIN=false`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import LoginView

from agent.conf import agent_settings
from agentsite.signin.oidc import provider_sign_in_url


class SignInView(LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        conf = agent_settings()
        provider = bool(conf.oidc_issuer.strip())
        context.update(
            provider_button=conf.oidc_button if provider else "",
            provider_url=provider_sign_in_url(context.get("next") or "") if provider else "",
            # With no provider the form is the only way in: shown as it always was.
            superusers_only=provider and not conf.password_login,
            provider_failed="provider_failed" in self.request.GET,
        )
        return context
