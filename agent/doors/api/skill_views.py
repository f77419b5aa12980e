"""`/api/skills`: every skill that may reach your prompt. The operator's (`"source":
"operator"`) are kept in the database, where staff change them since their text reaches
every user's agent, or as files in the workspace's root, read only here. Yours (`"source":
"yours"`) are files in your own folder, `skills/<name>/SKILL.md`, that your agent may have
written; you may remove them.

A name means the operator's skill when there is one (the one a prompt uses), else yours;
`?source=operator` or `?source=yours` says which when both have it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.conf import agent_settings
from agent.doors.api.known_fields import AS_READ, KnownFieldsOnly
from agent.doors.api.prompt_file_views import UNUSABLE, FolderUnusable, own_folder, removing
from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.serializers import ToolPatternsField
from skills_app import selectors, services
from skills_app.models import Skill
from skills_app.selectors import OPERATOR, SOURCES, YOURS, ListedSkill

logger = logging.getLogger(__name__)


class StaffWrites(BasePermission):
    message = "Only staff may change skills: their text reaches every user's agent."

    def has_permission(self, request: Request, view: Any) -> bool:
        # A delete is anyone's to ask: users remove their own skills (`SkillDetail.delete`).
        return (
            request.method in SAFE_METHODS
            or request.method == "DELETE"
            or bool(request.user and request.user.is_staff)
        )


class SkillOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    content = serializers.CharField()
    always = serializers.BooleanField()
    enabled = serializers.BooleanField()
    approve_tools = serializers.ListField(
        child=serializers.CharField(),
        help_text="Tools that wait for a person's yes while the skill is offered (a file "
        "says so in its frontmatter, `approve_tools: [exec]`).",
    )
    created = serializers.DateTimeField(allow_null=True, help_text="Null for a file.")
    updated = serializers.DateTimeField(
        allow_null=True, help_text="For a file, when it was last changed."
    )
    source = serializers.ChoiceField(
        SOURCES,
        help_text="`operator`: the database's or the workspace root's, for everyone; "
        "`yours`: a file of your own folder, for your prompt only.",
    )
    path = serializers.CharField(
        allow_null=True,
        help_text="The file it is kept in: in the workspace (the operator's) or in your "
        "folder (yours); null for a skill of the database.",
    )
    offered = serializers.BooleanField(
        help_text="Whether your prompt offers it: false when it is switched off, or when "
        "yours has the name of an operator's skill, which wins."
    )


class SkillIn(KnownFieldsOnly, serializers.ModelSerializer):
    approve_tools = ToolPatternsField(
        required=False,
        help_text="Tools that wait for a person's yes while the skill is offered.",
    )

    class Meta:
        model = Skill
        fields = ["name", "description", "content", "always", "enabled", "approve_tools"]


_SOURCE = OpenApiParameter(
    "source",
    OpenApiTypes.STR,
    enum=list(SOURCES),
    description="Whose skill of that name: the operator's (by default, when there is one) "
    "or yours.",
)


def _source(request: Request) -> str | None:
    source = request.query_params.get("source") or None
    if source is not None and source not in SOURCES:
        raise ValidationError({"source": [f"Give one of {', '.join(SOURCES)}."]})
    return source


def _folder(request: Request) -> Path | None:
    """The user's own folder, or None (their own skills left out) when it is a link."""
    try:
        return own_folder(request.user)
    except FolderUnusable:
        return None


def _listed(request: Request, name: str, source: str | None) -> ListedSkill | None:
    return selectors.find_listed_skill(
        workspace=agent_settings().workspace, folder=_folder(request), name=name, source=source
    )


def _skill(name: str) -> Skill:
    skill = selectors.find_skill(name=name)
    if skill is None:
        raise Http404("no such skill in the database (a skill kept as a file is changed there)")
    return skill


class SkillList(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(
        responses={200: SkillOut(many=True), **AUTH_ERRORS},
        description="Every skill that may reach your prompt, by name, the operator's first.",
    )
    def get(self, request: Request) -> Response:
        skills = selectors.skills_for(workspace=agent_settings().workspace, folder=_folder(request))
        return Response(SkillOut(skills, many=True).data)

    @extend_schema(request=SkillIn, responses={201: SkillOut, **INVALID, **AUTH_ERRORS})
    def post(self, request: Request) -> Response:
        data = SkillIn(data=request.data)
        data.is_valid(raise_exception=True)
        skill = services.create_skill(**data.validated_data)
        return Response(SkillOut(selectors.listed_skill(skill)).data, status=201)


class SkillDetail(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(
        parameters=[_SOURCE], responses={200: SkillOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def get(self, request: Request, name: str) -> Response:
        found = _listed(request, name, _source(request))
        if found is None:
            raise Http404("no such skill")
        return Response(SkillOut(found).data)

    @extend_schema(
        request=SkillIn, responses={200: SkillOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def put(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=False)

    @extend_schema(
        request=SkillIn, responses={200: SkillOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def patch(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=True)

    @extend_schema(
        parameters=[_SOURCE],
        responses={204: None, **INVALID, **AUTH_ERRORS, **NOT_FOUND, **UNUSABLE},
        description="Staff remove a skill of the database. Anyone removes a skill of their "
        "own folder (its whole `skills/<folder>/`; a link there goes as a link, and what it "
        "points at stays); an operator's skill is refused with 403.",
    )
    def delete(self, request: Request, name: str) -> Response:
        source = _source(request)
        found = _listed(request, name, source)
        if found is not None and found.source == OPERATOR:
            self._delete_operators(request, found)
            return Response(status=204)
        if source == OPERATOR:
            raise Http404("no such skill")
        # Yours; or, with nothing readable of that name, whatever your agent left at
        # skills/<name> in your folder.
        if not removing(services.delete_own_skill, folder=own_folder(request.user), name=name):
            raise Http404("no such skill")
        return Response(status=204)

    def _delete_operators(self, request: Request, found: ListedSkill) -> None:
        if not request.user.is_staff:
            hint = ""
            if _listed(request, found.name, YOURS) is not None:
                hint = f" To remove your own skill of that name, use ?source={YOURS}."
            raise PermissionDenied(
                f"'{found.name}' is the operator's skill, which reaches every user's agent; "
                f"you may remove only your own skills.{hint}"
            )
        if found.skill is None:
            raise PermissionDenied(
                f"'{found.name}' is kept as a file in the workspace ({found.path}); "
                "remove it there, on the server."
            )
        services.delete_skill(skill=found.skill)

    def _update(self, request: Request, name: str, *, partial: bool) -> Response:
        skill = _skill(name)
        as_read = SkillOut(selectors.listed_skill(skill)).data
        data = SkillIn(skill, data=request.data, partial=partial, context={AS_READ: as_read})
        data.is_valid(raise_exception=True)
        updated = services.update_skill(skill=skill, **data.validated_data)
        return Response(SkillOut(selectors.listed_skill(updated)).data)
