"""API routes. Each answers with and without a trailing slash, never through a redirect;
the schema lists the form without one (see `schema.drop_slashed_aliases`). Any other path
under /api/ is a JSON 404, a task id that is not a UUID included."""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path, re_path
from drf_spectacular.views import SpectacularSwaggerSplitView

from agent.doors.api import (
    approval_views,
    audit_views,
    cron_job_views,
    mcp_server_views,
    memory_views,
    prompt_file_views,
    search_views,
    session_views,
    share_views,
    site_views,
    skill_views,
    task_views,
    team_views,
    token_views,
    upload_views,
    usage_views,
)
from agent.doors.api.error_responses import not_found
from agent.doors.api.schema import SchemaView
from sessions_app import keys  # noqa: F401  (registers the `session_key` path converter)


def route(pattern: str, view: Any, name: str) -> list[URLPattern]:
    return [path(pattern, view, name=name), path(f"{pattern}/", view)]


urlpatterns = [
    *route("health", site_views.Health.as_view(), "health"),
    *route("tools", site_views.Tools.as_view(), "tools"),
    *route("models", site_views.Models.as_view(), "models"),
    *route("tasks", task_views.TaskCreate.as_view(), "task-create"),
    *route("tasks/<uuid:task_id>", task_views.TaskDetail.as_view(), "task-detail"),
    *route("tasks/<uuid:task_id>/cancel", task_views.TaskCancel.as_view(), "task-cancel"),
    *route("tasks/<uuid:task_id>/approve", task_views.TaskApprove.as_view(), "task-approve"),
    *route("approvals", approval_views.Approvals.as_view(), "approvals"),
    *route("sessions", session_views.SessionList.as_view(), "session-list"),
    *route("sessions/<session_key:key>", session_views.SessionDetail.as_view(), "session-detail"),
    *route(
        "sessions/<session_key:key>/messages",
        session_views.SessionMessages.as_view(),
        "session-messages",
    ),
    *route(
        "sessions/<session_key:key>/shares",
        share_views.SessionShares.as_view(),
        "session-shares",
    ),
    *route("shares", share_views.ShareList.as_view(), "share-list"),
    *route("shares/<slug:share_id>", share_views.ShareDetail.as_view(), "share-detail"),
    *route(
        "shares/<slug:share_id>/continue", share_views.ShareContinue.as_view(), "share-continue"
    ),
    *route("search", search_views.Search.as_view(), "search"),
    *route("skills", skill_views.SkillList.as_view(), "skill-list"),
    *route("skills/<slug:name>", skill_views.SkillDetail.as_view(), "skill-detail"),
    *route("prompt-files", prompt_file_views.PromptFileList.as_view(), "prompt-file-list"),
    *route(
        "prompt-files/<str:name>",
        prompt_file_views.PromptFileDetail.as_view(),
        "prompt-file-detail",
    ),
    *route("memory", memory_views.MemoryList.as_view(), "memory-list"),
    *route("memory/<int:memory_id>", memory_views.MemoryDetail.as_view(), "memory-detail"),
    *route("cron-jobs", cron_job_views.CronJobList.as_view(), "cron-job-list"),
    *route("cron-jobs/<int:job_id>", cron_job_views.CronJobDetail.as_view(), "cron-job-detail"),
    *route("cron-jobs/<int:job_id>/run", cron_job_views.CronJobRun.as_view(), "cron-job-run"),
    *route("mcp-servers", mcp_server_views.McpServerList.as_view(), "mcp-server-list"),
    *route(
        "mcp-servers/<slug:name>", mcp_server_views.McpServerDetail.as_view(), "mcp-server-detail"
    ),
    *route("uploads", upload_views.UploadList.as_view(), "upload-list"),
    *route("usage", usage_views.Usage.as_view(), "usage"),
    *route("me", team_views.Me.as_view(), "me"),
    *route("teams", team_views.TeamList.as_view(), "team-list"),
    *route("teams/<slug:slug>", team_views.TeamDetail.as_view(), "team-detail"),
    *route("audit", audit_views.Audit.as_view(), "audit"),
    *route("tokens", token_views.TokenList.as_view(), "token-list"),
    *route("tokens/<int:token_id>", token_views.TokenDetail.as_view(), "token-detail"),
    *route("schema", SchemaView.as_view(), "schema"),
    # The page's script as a file of its own (`?script`), since the Content-Security-Policy
    # refuses inline scripts.
    *route("docs", SpectacularSwaggerSplitView.as_view(url_name="schema"), "docs"),
    # Last: without it an unknown path falls through to the site's 404 handler.
    re_path(r"", not_found, name="not-found"),
]
