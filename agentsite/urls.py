from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agent import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<str:chat_id>/", views.chat, name="chat-session"),
    path("api/", include("agent.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
