"""`/api/prompt-files`: the bootstrap files of your own folder (`AGENTS.md`, `SOUL.md`,
`USER.md`, `TOOLS.md`, `IDENTITY.md`), which add to your prompt only. Your agent may have
written them, after reading something that told it to; here you see them and remove them.
The operator's files of the same names, in the workspace's root, are not listed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent import openat
from agent.conf import agent_settings
from agent.context import BOOTSTRAP_FILE_LIMIT, BOOTSTRAP_FILES
from agent.doors.api.schema import AUTH_ERRORS, NOT_FOUND, ErrorOut
from agent.tools.guards.folders import user_folder
from skills_app import selectors, services

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FolderUnusable(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "folder_unusable"
    default_detail = (
        "Your folder, or a folder in it, is a link to somewhere else; nothing is read or "
        "removed through it. Remove the link, or ask an administrator."
    )


class Unremovable(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "changed"
    default_detail = "It changed while it was being removed; look again and retry."


UNUSABLE = {
    409: OpenApiResponse(
        ErrorOut,
        description="Your folder, or a folder on the way, is a link (not followed), or what "
        "was to be removed changed meanwhile.",
    )
}


def removing(remove: Callable[..., T], **kwargs: Any) -> T:
    """`remove(**kwargs)`, with what the agent may do to the folder meanwhile as a 409."""
    try:
        return remove(**kwargs)
    except openat.LinkFound:
        raise FolderUnusable() from None
    except OSError:
        logger.warning("could not remove a prompt file", exc_info=True)
        raise Unremovable() from None


def own_folder(user: Any) -> Path:
    """The folder of `user`, where their own prompt files are; FolderUnusable when it is a
    link that leads elsewhere (the prompt does not read through one either)."""
    folder = user_folder(agent_settings().workspace, user.get_username())
    if folder.resolve() != folder:
        logger.warning("the folder %s leads elsewhere through a link", folder)
        raise FolderUnusable()
    return folder


class PromptFileOut(serializers.Serializer):
    name = serializers.CharField(help_text="AGENTS.md, SOUL.md, USER.md, TOOLS.md or IDENTITY.md.")
    path = serializers.CharField(help_text="Where it is, in your folder.")
    size = serializers.IntegerField(help_text="In bytes.")
    modified = serializers.DateTimeField()
    text = serializers.CharField(
        help_text=f"Its text as far as your prompt takes it: {BOOTSTRAP_FILE_LIMIT} characters."
    )
    truncated = serializers.BooleanField(help_text="Whether the file goes on past `text`.")


_NAME = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, enum=list(BOOTSTRAP_FILES)
)


def _own_file(request: Request, name: str) -> selectors.OwnFile:
    if name not in BOOTSTRAP_FILES:
        raise Http404(f"not one of {', '.join(BOOTSTRAP_FILES)}")
    files = selectors.own_bootstrap_files(
        folder=own_folder(request.user), names=[name], limit=BOOTSTRAP_FILE_LIMIT
    )
    if not files:
        raise Http404(f"your folder has no {name}")
    return files[0]


class PromptFileList(APIView):
    @extend_schema(
        responses={200: PromptFileOut(many=True), **AUTH_ERRORS, **UNUSABLE},
        description="The bootstrap files of your own folder, which add to your prompt only, "
        "in the order the prompt takes them. Links and other odd files are not listed: "
        "the prompt does not read them.",
    )
    def get(self, request: Request) -> Response:
        files = selectors.own_bootstrap_files(
            folder=own_folder(request.user), names=BOOTSTRAP_FILES, limit=BOOTSTRAP_FILE_LIMIT
        )
        return Response(PromptFileOut(files, many=True).data)


class PromptFileDetail(APIView):
    @extend_schema(
        parameters=[_NAME], responses={200: PromptFileOut, **AUTH_ERRORS, **NOT_FOUND, **UNUSABLE}
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(PromptFileOut(_own_file(request, name)).data)

    @extend_schema(
        parameters=[_NAME],
        responses={204: None, **AUTH_ERRORS, **NOT_FOUND, **UNUSABLE},
        description="Remove that file from your folder. A link there goes as a link; what "
        "it points at stays.",
    )
    def delete(self, request: Request, name: str) -> Response:
        if name not in BOOTSTRAP_FILES:
            raise Http404(f"not one of {', '.join(BOOTSTRAP_FILES)}")
        removed = removing(services.delete_own_file, folder=own_folder(request.user), name=name)
        if not removed:
            raise Http404(f"your folder has no {name}")
        return Response(status=status.HTTP_204_NO_CONTENT)
