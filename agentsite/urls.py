from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agent import views
from agentsite import errors

# The admin's app is SimpleAdminConfig (see INSTALLED_APPS): the `admin.py` modules load here,
# with the URLs that need them, not in every process that starts Django.
admin.autodiscover()

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<str:chat_id>/", views.chat, name="chat-session"),
    path("api/", include("agent.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

# Error pages: JSON under /api/, the site's own plain pages elsewhere (see agentsite.errors).
handler400 = errors.bad_request
handler403 = errors.permission_denied
handler404 = errors.page_not_found
handler500 = errors.server_error
