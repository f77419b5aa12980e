"""The OpenAI door's routes, under `/v1/`: each answers with and without a trailing slash,
and any other path is a 404 in OpenAI's shape."""

from __future__ import annotations

from django.urls import path, re_path

from agent.doors.openai import responses_views, views

urlpatterns = [
    path("models", views.models, name="openai-models"),
    path("models/", views.models),
    # A model id may hold a slash (`agentsite:openai/gpt-4o-mini`).
    path("models/<path:name>", views.model, name="openai-model"),
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("chat/completions/", views.chat_completions),
    path("responses", responses_views.responses, name="openai-responses"),
    path("responses/", responses_views.responses),
    path("responses/<str:response_id>", responses_views.response, name="openai-response"),
    re_path(r"", views.not_found),
]
