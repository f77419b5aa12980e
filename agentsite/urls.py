from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agent.doors import pages, share_page
from agentsite import error_pages
from agentsite.signin.page import SignInView
from sessions_app import keys  # noqa: F401  (registers the `chat` path converter)

# The admin's app is SimpleAdminConfig (see INSTALLED_APPS): the `admin.py` modules load here,
# with the URLs that need them, not in every process that starts Django.
admin.autodiscover()

urlpatterns = [
    path("", pages.chat, name="chat"),
    # A web chat by its id, an API session by its key (`sessions_app.keys`).
    path("c/<chat:key>/", pages.chat, name="chat-session"),
    # A chat shared read-only with teams and people (agent.doors.share_page).
    path("shared/<slug:share_id>/", share_page.shared, name="shared-chat"),
    path("favicon.ico", pages.favicon, name="favicon"),
    path("api/", include("agent.doors.api.urls")),
    # The OpenAI-compatible door (agent.doors.openai).
    path("v1/", include("agent.doors.openai.urls")),
    # The identity provider's provisioning (agent.doors.scim), with AGENT_SCIM_TOKEN.
    path("scim/v2/", include("agent.doors.scim.urls")),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # Sign-in through the organisation's OpenID Connect provider (agentsite.signin.oidc).
    path("oidc/", include("mozilla_django_oidc.urls")),
]

# Error pages: JSON under /api/, the site's own plain pages elsewhere (see agentsite.error_pages).
handler400 = error_pages.bad_request
handler403 = error_pages.permission_denied
handler404 = error_pages.page_not_found
handler500 = error_pages.server_error
