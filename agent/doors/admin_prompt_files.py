"""The admin's page of one user's own prompt files: the bootstrap files (`AGENTS.md`, …) and
skills of their folder, which add to that user's prompt only. Staff see what each user's
agent left there, and remove what should not be; the operator's files, in the workspace's
root, are not on it. `agent/admin.py` hangs it on the admin of users (a column and a field
link to it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from agent.conf import agent_settings
from agent.context import BOOTSTRAP_FILE_LIMIT, BOOTSTRAP_FILES
from agent.tools.guards.folders import user_folder
from skills_app import selectors, services

logger = logging.getLogger(__name__)

BOOTSTRAP = "bootstrap"
SKILL = "skill"
# Characters of each file shown on the page; the rest is a click away on the server only.
PREVIEW_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class PromptFile:
    kind: str
    name: str
    path: str
    size: int | None
    modified: datetime | None
    offered: bool
    preview: str
    cut: bool


def prompt_files(folder: Path) -> list[PromptFile]:
    """The user's own files that may reach their prompt: bootstrap files, then skills."""
    rows = [
        PromptFile(
            kind=BOOTSTRAP,
            name=own.name,
            path=own.path,
            size=own.size,
            modified=own.modified,
            offered=True,
            preview=own.text[:PREVIEW_CHARS],
            cut=own.truncated or len(own.text) > PREVIEW_CHARS,
        )
        for own in selectors.own_bootstrap_files(
            folder=folder, names=BOOTSTRAP_FILES, limit=BOOTSTRAP_FILE_LIMIT
        )
    ]
    workspace = agent_settings().workspace
    for skill in selectors.skills_for(workspace=workspace, folder=folder):
        if skill.source == selectors.YOURS and skill.path is not None:
            rows.append(
                PromptFile(
                    kind=SKILL,
                    name=skill.name,
                    path=skill.path,
                    size=skill.size,
                    modified=skill.updated,
                    offered=skill.offered,
                    preview=skill.content[:PREVIEW_CHARS],
                    cut=len(skill.content) > PREVIEW_CHARS,
                )
            )
    return rows


def remove(folder: Path, kind: str, name: str) -> bool:
    """Remove the user's own bootstrap file or skill `name`; whether something went."""
    if kind == BOOTSTRAP and name in BOOTSTRAP_FILES:
        return services.delete_own_file(folder=folder, name=name)
    if kind == SKILL:
        return services.delete_own_skill(folder=folder, name=name) > 0
    return False


class PromptFilesMixin:
    """For the admin of users: a page per user listing their prompt files, with a delete
    button each for those who may change the user."""

    admin_site: admin.AdminSite
    opts: Any

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        # Before the model admin's own routes, whose `<object_id>/` catches the rest.
        return [
            path(
                "<path:object_id>/prompt-files/",
                self.admin_site.admin_view(self.prompt_files_view),
                name="{}_{}_prompt_files".format(*info),
            ),
            *super().get_urls(),  # type: ignore[misc]
        ]

    @admin.display(description="prompt files")
    def prompt_files_link(self, obj: Any) -> str:
        if obj is None or obj.pk is None:
            return "-"
        url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_prompt_files", args=[obj.pk]
        )
        return format_html('<a href="{}">prompt files</a>', url)

    def get_list_display(self, request: HttpRequest) -> Any:
        return (*super().get_list_display(request), "prompt_files_link")  # type: ignore[misc]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        return (*fields, "prompt_files_link") if obj is not None else fields

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if obj is None:
            return fieldsets
        return (*fieldsets, ("Agent", {"fields": ("prompt_files_link",)}))

    def prompt_files_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        user = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if user is None:
            raise Http404("no such user")
        if not self.has_view_or_change_permission(request, user):  # type: ignore[attr-defined]
            raise PermissionDenied
        may_delete = bool(self.has_change_permission(request, user))  # type: ignore[attr-defined]
        folder = user_folder(agent_settings().workspace, user.get_username())
        # A folder that leads elsewhere through a link is not read, as a turn refuses it.
        usable = folder.resolve() == folder
        if request.method == "POST":
            if not may_delete:
                raise PermissionDenied
            self._remove(request, folder if usable else None, user)
            return HttpResponseRedirect(request.path)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Prompt files of {user.get_username()}",
            "opts": self.opts,
            "original": user,
            "folder": folder,
            "usable": usable,
            "rows": prompt_files(folder) if usable else [],
            "may_delete": may_delete,
            "limit": BOOTSTRAP_FILE_LIMIT,
        }
        return TemplateResponse(request, "admin/agent/prompt_files.html", context)

    def _remove(self, request: HttpRequest, folder: Path | None, user: Any) -> None:
        kind, name = request.POST.get("kind", ""), request.POST.get("name", "")
        if folder is None:
            self.message_user(  # type: ignore[attr-defined]
                request, "The folder is a link; nothing was removed.", messages.ERROR
            )
            return
        try:
            removed = remove(folder, kind, name)
        except OSError as exc:  # a link on the way, or a file changed meanwhile
            logger.warning("could not remove %s %r of %s: %s", kind, name, folder, exc)
            removed = False
        if removed:
            logger.info("%s removed the %s %r of %s", request.user, kind, name, user)
            self.message_user(request, f"Removed the {kind} {name}.")  # type: ignore[attr-defined]
        else:
            self.message_user(  # type: ignore[attr-defined]
                request, f"No {kind} {name} was there to remove.", messages.WARNING
            )


def with_prompt_files(base: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    """The admin class `base` (the users' admin as registered) with the prompt files page."""
    return type(base.__name__, (PromptFilesMixin, base), {"__module__": __name__})
