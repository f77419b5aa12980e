"""`/api/uploads`: files into your agent's folder, under `uploads/`, where its file tools
and `exec` read them."""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.uploadhandler import FileUploadHandler
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.conf import agent_settings
from agent.doors.api.known_fields import KnownFieldsOnly
from agent.doors.api.schema import AUTH_ERRORS, INVALID, ErrorOut
from agent.tools.guards.uploads import (
    UploadsUnusable,
    UploadTooLarge,
    list_uploads,
    save_upload,
)

logger = logging.getLogger(__name__)

# What a multipart body may carry besides the file's bytes: boundaries, part headers, the
# file's name.
_ENVELOPE_BYTES = 64 * 1024


class TooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"The file is too large: at most {limit} bytes are accepted.")


class FolderUnusable(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "folder_unusable"
    default_detail = (
        "Your folder's uploads/ is not a plain folder (a link, or a file, is in its place); "
        "remove it, or ask an administrator."
    )


class CappedUpload(FileUploadHandler):
    """Counts the bytes of the request's files as Django parses them, passing them on to
    the usual handlers, and stops at the cap: a body that says it is too large is refused
    before it is read, one that only turns out so as soon as it does."""

    def __init__(self, request: Any, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.files = 0

    def handle_raw_input(
        self,
        input_data: Any,
        META: dict[str, Any],
        content_length: int,
        boundary: str,
        encoding: str | None = None,
    ) -> None:
        if content_length > self.limit + _ENVELOPE_BYTES:
            raise TooLarge(self.limit)

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.files += 1
        if self.files > 1:
            raise serializers.ValidationError({"file": ["Send one file at a time."]})

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            raise TooLarge(self.limit)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


class UploadIn(KnownFieldsOnly):
    file = serializers.FileField(allow_empty_file=True, help_text="The file, one per request.")


class UploadOut(serializers.Serializer):
    path = serializers.CharField(
        help_text="Where it is in your folder: the path to give the agent's file tools."
    )
    name = serializers.CharField(
        help_text="The name it was saved under: made safe, and numbered if the name was taken."
    )
    size = serializers.IntegerField(help_text="In bytes.")


class UploadEntryOut(UploadOut):
    modified = serializers.DateTimeField()


_TOO_LARGE = {413: OpenApiResponse(ErrorOut, description="Larger than `AGENT_MAX_UPLOAD_BYTES`.")}
_UNUSABLE = {
    409: OpenApiResponse(ErrorOut, description="`uploads/` in your folder is not a plain folder.")
}


class UploadList(APIView):
    parser_classes = [MultiPartParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before authentication: the login-cookie check reads the form (for its CSRF
        # field), which parses the body with whatever handlers are set by then.
        if request.method == "POST":
            django_request = request._request
            django_request.upload_handlers = [
                CappedUpload(django_request, agent_settings().max_upload_bytes),
                *django_request.upload_handlers,
            ]
        super().initial(request, *args, **kwargs)

    @extend_schema(
        responses={200: UploadEntryOut(many=True), **AUTH_ERRORS, **_UNUSABLE},
        description="The files in `uploads/` of your folder, newest first (at most 500).",
    )
    def get(self, request: Request) -> Response:
        settings = agent_settings()
        try:
            uploads = list_uploads(
                settings.workspace, request.user.get_username(), sandbox_uid=settings.sandbox_uid
            )
        except UploadsUnusable:
            raise FolderUnusable() from None
        return Response(UploadEntryOut(uploads, many=True).data)

    @extend_schema(
        request=UploadIn,
        responses={201: UploadOut, **INVALID, **AUTH_ERRORS, **_UNUSABLE, **_TOO_LARGE},
        description="Save a file (multipart, field `file`) in `uploads/` of your folder. "
        "Its name is made safe (no folders, no leading dot, no control characters, at most "
        "150 bytes) and never replaces a file: a name taken gets a number, "
        "`report (1).pdf`. Tell the agent the `path` to have it read the file.",
    )
    def post(self, request: Request) -> Response:
        data = UploadIn(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        settings = agent_settings()
        try:
            stored = save_upload(
                settings.workspace,
                request.user.get_username(),
                upload.name,
                upload.chunks(),
                limit=settings.max_upload_bytes,
                sandbox_uid=settings.sandbox_uid,
            )
        except UploadTooLarge as exc:
            raise TooLarge(exc.limit) from None
        except UploadsUnusable:
            raise FolderUnusable() from None
        return Response(UploadOut(stored).data, status=status.HTTP_201_CREATED)
