"""`/api/uploads`: a file into `uploads/` of the caller's own folder, under a safe name that
never replaces anything, never through a link the agent planted there, and never past the
size cap; the agent's `read_file` reads it at the path the answer gives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from agent.tools.guards.folders import make_user_folder, user_folder
from agent.tools.guards.uploads import MAX_NAME_BYTES, safe_name
from agent.turn import SessionRef, run_turn
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.usefixtures("agent_settings")

URL = "/api/uploads"
BOUNDARY = "upload-boundary-5c1f"


def multipart(filename: str, content: bytes) -> dict[str, Any]:
    """A request body with the file name exactly as given: the test client would keep only
    its last path part, as a browser does."""
    head = (
        f"--{BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    )
    body = head.encode() + content + f"\r\n--{BOUNDARY}--\r\n".encode()
    return {"data": body, "content_type": f"multipart/form-data; boundary={BOUNDARY}"}


def upload(client: Any, name: str, content: bytes = b"hello") -> Any:
    return client.post(URL, {"file": SimpleUploadedFile(name, content)}, format="multipart")


def uploads_of(workspace: Path, username: str) -> Path:
    return user_folder(workspace, username) / "uploads"


def test_a_file_lands_in_the_callers_folder(api: APIClient, workspace: Path) -> None:
    response = upload(api, "report.pdf", b"%PDF-1.7 the report")

    assert response.status_code == 201, response.content
    assert response.json() == {"path": "uploads/report.pdf", "name": "report.pdf", "size": 19}
    stored = uploads_of(workspace, "ada") / "report.pdf"
    assert stored.read_bytes() == b"%PDF-1.7 the report"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert (stored.parent.stat().st_mode & 0o777) == 0o700


def test_a_name_taken_gets_a_number(api: APIClient, workspace: Path) -> None:
    names = [upload(api, "report.pdf", f"v{n}".encode()).json()["name"] for n in range(3)]
    names.append(upload(api, "README", b"r").json()["name"])
    names.append(upload(api, "README", b"r").json()["name"])

    assert names == ["report.pdf", "report (1).pdf", "report (2).pdf", "README", "README (1)"]
    folder = uploads_of(workspace, "ada")
    assert [(folder / n).read_bytes() for n in names[:3]] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize(
    ("sent", "saved"),
    [
        ("../../x", "x"),
        ("a/b", "b"),
        ("C:\\Users\\ada\\notes.txt", "notes.txt"),
        (".bashrc", "bashrc"),
        ("..hidden..txt", "hidden..txt"),
        ("  spaced  .md", "spaced  .md"),
        ("over\u202etxt.exe", "overtxt.exe"),
    ],
)
def test_unsafe_names_are_made_plain(
    api: APIClient, workspace: Path, sent: str, saved: str
) -> None:
    response = api.post(URL, **multipart(sent, b"data"))

    assert response.status_code == 201, response.content
    assert response.json()["path"] == f"uploads/{saved}"
    assert (uploads_of(workspace, "ada") / saved).read_bytes() == b"data"
    assert sorted(p.name for p in user_folder(workspace, "ada").iterdir()) == ["uploads"]
    assert not (workspace / "x").exists() and not (workspace / "users" / "x").exists()


def test_a_name_with_nothing_left_gets_one_made_up(api: APIClient, workspace: Path) -> None:
    response = api.post(URL, **multipart("...", b"dots"))

    assert response.status_code == 201, response.content
    name = response.json()["name"]
    assert name.startswith("upload-")
    assert (uploads_of(workspace, "ada") / name).read_bytes() == b"dots"


def test_safe_name() -> None:
    assert safe_name("a\x00b\x1fc\x7f\u200bd") == "abcd"
    assert safe_name("/").startswith("upload-")
    long = safe_name("é" * 300 + ".tar.gz")
    assert long.endswith(".gz") and len(long.encode()) <= MAX_NAME_BYTES
    long.encode().decode()  # cut between characters, not inside one
    assert len(safe_name("x" * 400).encode()) == MAX_NAME_BYTES


def test_a_symlinked_uploads_folder_is_refused(
    api: APIClient, workspace: Path, outside: Path
) -> None:
    folder = make_user_folder(workspace, "ada")
    (folder / "uploads").symlink_to(outside)

    response = upload(api, "secret.txt", b"overwritten")

    assert response.status_code == 409, response.content
    assert "uploads/" in response.json()["detail"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert api.get(URL).status_code == 409


def test_a_file_in_the_place_of_the_uploads_folder_is_refused(
    api: APIClient, workspace: Path
) -> None:
    folder = make_user_folder(workspace, "ada")
    (folder / "uploads").write_text("not a folder")

    assert upload(api, "a.txt").status_code == 409
    assert (folder / "uploads").read_text() == "not a folder"


def test_a_link_at_the_name_is_not_followed(api: APIClient, workspace: Path, outside: Path) -> None:
    folder = uploads_of(workspace, "ada")
    folder.mkdir(parents=True)
    (folder / "secret.txt").symlink_to(outside / "secret.txt")
    (folder / "new.txt").symlink_to(outside / "new.txt")  # leads nowhere yet

    first = upload(api, "secret.txt", b"overwritten")
    second = upload(api, "new.txt", b"created")

    assert first.json()["name"] == "secret (1).txt"
    assert second.json()["name"] == "new (1).txt"
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (outside / "new.txt").exists()
    assert (folder / "secret (1).txt").read_bytes() == b"overwritten"


def test_over_the_cap_is_a_413_and_nothing_is_kept(
    api: APIClient, workspace: Path, settings: Any
) -> None:
    settings.AGENT_MAX_UPLOAD_BYTES = 1000

    assert upload(api, "exact.bin", b"x" * 1000).status_code == 201
    # Past the cap by a byte: found while the body is read.
    response = upload(api, "over.bin", b"x" * 1001)
    assert response.status_code == 413
    assert response.json() == {"detail": "The file is too large: at most 1000 bytes are accepted."}
    # Far past it: refused by its Content-Length, before it is read.
    assert upload(api, "huge.bin", b"x" * 200_000).status_code == 413
    assert sorted(p.name for p in uploads_of(workspace, "ada").iterdir()) == ["exact.bin"]


def test_over_the_cap_with_the_login_cookie(ada: User, workspace: Path, settings: Any) -> None:
    """The login cookie's CSRF check reads the form before the view does: the cap holds
    there too, and the token in the header lets the upload in."""
    settings.AGENT_MAX_UPLOAD_BYTES = 1000
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(ada)
    secret = "a" * 32
    browser.cookies["csrftoken"] = secret

    def send(content: bytes, **headers: str) -> Any:
        data = {"file": SimpleUploadedFile("page.txt", content)}
        return browser.post(URL, data, headers=headers)

    assert send(b"x" * 10).status_code == 403  # no CSRF token
    assert send(b"x" * 1001, X_CSRFToken=secret).status_code == 413
    assert send(b"x" * 10, X_CSRFToken=secret).status_code == 201
    assert (uploads_of(workspace, "ada") / "page.txt").read_bytes() == b"x" * 10


def test_one_file_a_request_and_a_file_is_needed(api: APIClient) -> None:
    two = {"file": SimpleUploadedFile("a.txt", b"a"), "other": SimpleUploadedFile("b", b"b")}
    response = api.post(URL, two, format="multipart")
    assert response.status_code == 400
    assert "file" in response.json()

    assert api.post(URL, {}, format="multipart").status_code == 400
    assert api.post(URL, {"file": "text"}, format="json").status_code == 415


def test_the_list_is_the_callers_own_newest_first(
    api: APIClient, workspace: Path, other_token: str
) -> None:
    upload(api, "old.txt", b"old")
    upload(api, "new.txt", b"newer")
    folder = uploads_of(workspace, "ada")
    os.utime(folder / "old.txt", (1_700_000_000, 1_700_000_000))
    (folder / "link").symlink_to(folder / "new.txt")
    (folder / "sub").mkdir()

    listed = api.get(URL).json()

    assert [(e["name"], e["path"], e["size"]) for e in listed] == [
        ("new.txt", "uploads/new.txt", 5),
        ("old.txt", "uploads/old.txt", 3),
    ]
    assert listed[1]["modified"].startswith("2023-11-14T22:13:20")

    bob = APIClient(HTTP_AUTHORIZATION=f"Token {other_token}")
    assert bob.get(URL).json() == []
    response = upload(bob, "new.txt", b"bob's")
    assert response.json()["path"] == "uploads/new.txt"
    assert (uploads_of(workspace, "bob") / "new.txt").read_bytes() == b"bob's"
    assert (folder / "new.txt").read_bytes() == b"newer"
    assert [e["name"] for e in bob.get(URL).json()] == ["new.txt"]


@pytest.mark.parametrize("method", ["get", "post"])
def test_without_a_login_nothing(method: str, db: None, workspace: Path) -> None:
    client = APIClient()
    sent = multipart("a.txt", b"a") if method == "post" else {}
    response = getattr(client, method)(URL, **sent)
    assert response.status_code in (401, 403)
    assert not (workspace / "users").exists()


def test_the_schema_documents_uploads(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operations = schema["paths"]["/api/uploads"]
    post = operations["post"]
    assert "multipart/form-data" in post["requestBody"]["content"]
    assert {"201", "400", "401", "403", "409", "413"} <= set(post["responses"])
    assert "200" in operations["get"]["responses"]
    assert "/api/uploads/" not in schema["paths"]


@pytest.mark.django_db(transaction=True)
async def test_the_agent_reads_the_upload_at_its_path(llm: ScriptedLLM, workspace: Path) -> None:
    user = await User.objects.acreate_user("ada", password="pw")
    client = APIClient()
    client.force_authenticate(user)
    content = "quarterly figures: 42 apples\n"
    response = await sync_to_async(upload)(client, "../figures.csv", content.encode())
    path = response.json()["path"]
    assert path == "uploads/figures.csv"

    llm.tool_call("read_file", {"path": path}).reply("There are 42 apples.")
    await run_turn(SessionRef("web:read", user), f"Attached: {path}", channel="web")

    results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 1 and "quarterly figures: 42 apples" in results[0]
