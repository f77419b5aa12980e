"""`/api/mcp-servers`: site-wide MCP servers by name. Everyone signed in reads them, staff
alone change them, and the values of `env` and `headers` never come back out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mcp_app import selectors, services
from mcp_app.masking import MASK
from mcp_app.models import McpServer

pytestmark = pytest.mark.django_db

API_KEY = "sk-stdio-secret-4711"
BEARER = "Bearer http-secret-0815"
SECRETS = (API_KEY, BEARER, "second-secret-42")

FILES = {
    "name": "files",
    "transport": "stdio",
    "command": "npx",
    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
    "env": {"API_KEY": API_KEY, "REGION": "second-secret-42"},
}
SEARCH = {
    "name": "search",
    "transport": "http",
    "url": "https://mcp.example.com/mcp",
    "headers": {"Authorization": BEARER},
    "tool_timeout": 60,
}


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.default_format = "json"  # the API parses JSON only
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def staff() -> APIClient:
    return client_of(User.objects.create_user("root", is_staff=True))


@pytest.fixture
def reader(token: str) -> APIClient:
    """`ada`, signed in with her token, not staff."""
    client = APIClient()
    client.default_format = "json"
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def stored(name: str) -> McpServer:
    return McpServer.objects.get(name=name)


def assert_no_secret(response: Any) -> None:
    body = response.content.decode()
    for secret in SECRETS:
        assert secret not in body, (response.status_code, body)


def test_staff_add_read_change_and_delete_a_server(staff: APIClient) -> None:
    created = staff.post("/api/mcp-servers", FILES)
    assert created.status_code == 201, created.json()
    body = created.json()
    assert {k: body[k] for k in ("name", "transport", "command", "args")} == {
        k: FILES[k] for k in ("name", "transport", "command", "args")
    }
    assert body["env"] == {"API_KEY": MASK, "REGION": MASK}
    assert body["url"] == "" and body["headers"] == {}
    assert body["enabled"] is True and body["tool_timeout"] == 30
    assert stored("files").env == FILES["env"]

    for path in ("/api/mcp-servers/files", "/api/mcp-servers/files/"):
        read = staff.get(path)
        assert read.status_code == 200 and read.json() == body
    for path in ("/api/mcp-servers", "/api/mcp-servers/"):
        assert staff.get(path).json() == [body]

    changed = staff.patch("/api/mcp-servers/files", {"enabled": False, "tool_timeout": 5})
    assert changed.status_code == 200
    assert changed.json()["enabled"] is False and changed.json()["tool_timeout"] == 5

    replaced = staff.put("/api/mcp-servers/files", {**SEARCH, "name": "files"})
    assert replaced.status_code == 200
    assert replaced.json()["transport"] == "http" and replaced.json()["headers"] == {
        "Authorization": MASK
    }

    assert staff.delete("/api/mcp-servers/files").status_code == 204
    assert staff.get("/api/mcp-servers/files").status_code == 404
    assert not McpServer.objects.exists()


def test_the_list_is_by_name(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", SEARCH)
    staff.post("/api/mcp-servers", FILES)
    assert [s["name"] for s in staff.get("/api/mcp-servers").json()] == ["files", "search"]


def test_other_users_read_servers_but_cannot_change_them(
    staff: APIClient, reader: APIClient
) -> None:
    staff.post("/api/mcp-servers", FILES)
    listed = reader.get("/api/mcp-servers")
    assert listed.status_code == 200 and [s["name"] for s in listed.json()] == ["files"]
    assert reader.get("/api/mcp-servers/files").json()["env"] == {"API_KEY": MASK, "REGION": MASK}
    for method, path, data in [
        ("post", "/api/mcp-servers", {**FILES, "name": "mine"}),
        ("patch", "/api/mcp-servers/files", {"command": "sh"}),
        ("put", "/api/mcp-servers/files", {**FILES, "command": "sh"}),
        ("delete", "/api/mcp-servers/files", None),
    ]:
        response = getattr(reader, method)(path, data)
        assert response.status_code == 403, (method, path)
        assert "stdio server runs a command" in response.json()["detail"]
    server = stored("files")
    assert server.command == "npx" and server.env == FILES["env"]
    assert list(McpServer.objects.values_list("name", flat=True)) == ["files"]


def test_other_users_see_neither_arguments_nor_a_urls_tokens(
    staff: APIClient, reader: APIClient
) -> None:
    staff.post("/api/mcp-servers", {**FILES, "args": ["--token", "tok-123", "/srv"]})
    staff.post(
        "/api/mcp-servers",
        {"name": "web", "transport": "http", "url": "https://u:pw@mcp.example:8443/s/TOK/mcp?k=q1"},
    )
    files, web = reader.get("/api/mcp-servers").json()
    assert files["args"] == [MASK, MASK, MASK]
    assert web["url"] == f"https://mcp.example:8443/{MASK}"
    for secret in ("tok-123", "pw", "TOK", "q1"):
        assert secret not in reader.get("/api/mcp-servers").content.decode()
    # Staff, who change them, see them whole.
    assert staff.get("/api/mcp-servers/files").json()["args"] == ["--token", "tok-123", "/srv"]
    assert staff.get("/api/mcp-servers/web").json()["url"].endswith("/s/TOK/mcp?k=q1")


def test_anonymous_clients_reach_no_server(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    anonymous = APIClient()
    for method in ("get", "post"):
        assert getattr(anonymous, method)("/api/mcp-servers").status_code == 401
    for method in ("get", "patch", "put", "delete"):
        assert getattr(anonymous, method)("/api/mcp-servers/files").status_code == 401


def test_no_answer_ever_holds_a_secret(staff: APIClient, reader: APIClient) -> None:
    responses = [
        staff.post("/api/mcp-servers", FILES),
        staff.post("/api/mcp-servers", SEARCH),
        staff.get("/api/mcp-servers"),
        reader.get("/api/mcp-servers"),
        staff.get("/api/mcp-servers/files"),
        reader.get("/api/mcp-servers/search"),
        staff.patch("/api/mcp-servers/files", {"tool_timeout": 9}),
        staff.patch("/api/mcp-servers/search", {"headers": {"Authorization": MASK}}),
        staff.put("/api/mcp-servers/files", {**FILES, "env": {"API_KEY": MASK}}),
        # Refused input that carries a secret is not echoed either.
        staff.post(
            "/api/mcp-servers",
            {**SEARCH, "name": "bad", "headers": {"Authorization": BEARER + "\r\nX: y"}},
        ),
        staff.post("/api/mcp-servers", {**FILES, "name": "bad", "env": {"1BAD": API_KEY}}),
        staff.post("/api/mcp-servers", {**FILES, "name": "bad", "env": {"K": API_KEY + "\x00"}}),
        staff.patch("/api/mcp-servers/files", {"env": {"API_KEY": MASK, "NEW": MASK}}),
        reader.patch("/api/mcp-servers/files", {"env": {"API_KEY": API_KEY}}),
    ]
    assert [r.status_code for r in responses] == [201, 201, *[200] * 7, 400, 400, 400, 400, 403]
    for response in responses:
        assert_no_secret(response)
    assert stored("files").env == {"API_KEY": API_KEY}
    assert stored("search").headers == SEARCH["headers"]


def test_a_server_read_and_sent_back_keeps_its_secrets(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    staff.post("/api/mcp-servers", SEARCH)
    for name, field in (("files", "env"), ("search", "headers")):
        before = getattr(stored(name), field)
        read = staff.get(f"/api/mcp-servers/{name}").json()
        assert staff.put(f"/api/mcp-servers/{name}", read).status_code == 200
        # Read again: the PUT moved `updated`, which a body may carry only as it reads now.
        read = staff.get(f"/api/mcp-servers/{name}").json()
        assert staff.patch(f"/api/mcp-servers/{name}", read).status_code == 200
        assert getattr(stored(name), field) == before


def test_a_submitted_object_replaces_the_stored_one(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    path = "/api/mcp-servers/files"
    # Kept by its mask, changed, added, and REGION left out: removed.
    changed = staff.patch(path, {"env": {"API_KEY": MASK, "DEBUG": "1"}})
    assert changed.status_code == 200
    assert changed.json()["env"] == {"API_KEY": MASK, "DEBUG": MASK}
    assert stored("files").env == {"API_KEY": API_KEY, "DEBUG": "1"}

    assert staff.patch(path, {"env": {"API_KEY": "rotated"}}).status_code == 200
    assert stored("files").env == {"API_KEY": "rotated"}
    assert staff.patch(path, {"env": {}}).json()["env"] == {}
    assert stored("files").env == {}


def test_patch_without_env_or_headers_leaves_them_alone(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    staff.post("/api/mcp-servers", SEARCH)
    assert staff.patch("/api/mcp-servers/files", {"args": []}).status_code == 200
    assert staff.patch("/api/mcp-servers/search", {"url": "http://mcp:8000/mcp"}).status_code == 200
    # PUT too changes only what it is given, as the other endpoints' PUT does.
    put = staff.put("/api/mcp-servers/files", {"name": "files", "transport": "stdio"})
    assert put.status_code == 200
    assert stored("files").env == FILES["env"] and stored("files").args == []
    assert stored("search").headers == SEARCH["headers"]


def test_header_masks_match_names_in_any_case(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", SEARCH)
    changed = staff.patch("/api/mcp-servers/search", {"headers": {"authorization": MASK}})
    assert changed.status_code == 200 and changed.json()["headers"] == {"authorization": MASK}
    assert stored("search").headers == {"authorization": BEARER}


def test_a_mask_with_no_stored_value_is_refused(staff: APIClient) -> None:
    new = staff.post("/api/mcp-servers", {**FILES, "env": {"API_KEY": MASK}})
    assert new.status_code == 400 and "no stored value" in new.json()["env"][0]
    assert not McpServer.objects.exists()

    staff.post("/api/mcp-servers", FILES)
    renamed_key = staff.patch("/api/mcp-servers/files", {"env": {"TOKEN": MASK}})
    assert renamed_key.status_code == 400 and "TOKEN" in renamed_key.json()["env"][0]
    assert stored("files").env == FILES["env"]


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"name": "Files"}, "name", "pattern"),
        ({"name": "a" * 33}, "name", "32"),
        ({"name": ""}, "name", "blank"),
        ({"transport": "sse"}, "transport", "valid choice"),
        ({"command": ""}, "command", "needs the command"),
        ({"command": "  "}, "command", "needs the command"),
        ({"command": 42}, "command", "valid string"),
        ({"args": "-y server"}, "args", "list"),
        ({"args": ["-y", 1]}, "args", "valid string"),
        ({"args": ["a\x00b"]}, "args", "Null characters"),
        ({"env": ["A=1"]}, "env", "dictionary"),
        ({"env": {"1ST": "x"}}, "env", "not a valid variable name"),
        ({"env": {"MY-KEY": "x"}}, "env", "not a valid variable name"),
        ({"env": {"": "x"}}, "env", "names to string values"),
        ({"env": {"KEY": 42}}, "env", "valid string"),
        ({"env": {"KEY": None}}, "env", "null"),
        ({"tool_timeout": 0}, "tool_timeout", "greater than or equal to 1"),
        ({"tool_timeout": 3601}, "tool_timeout", "less than or equal to 3600"),
        ({"tool_timeout": "soon"}, "tool_timeout", "valid integer"),
        ({"enabled": "maybe"}, "enabled", "valid boolean"),
        ({"transport": "http"}, "url", "needs its URL"),
        ({"transport": "http", "url": "ftp://example.com"}, "url", "http:// or https://"),
        ({"transport": "http", "url": "https://"}, "url", "needs a host"),
        ({"transport": "http", "url": "https://x.org:99999/"}, "url", "not valid"),
        ({"transport": "http", "url": "https://x.org/a b"}, "url", "spaces"),
        ({"transport": "http", "url": "u", "headers": {"Bad Name": "x"}}, "headers", "header"),
        (
            {"transport": "http", "url": "http://h", "headers": {"X-A": "v\r\nX-B: w"}},
            "headers",
            "one line",
        ),
        (
            {"transport": "http", "url": "http://h", "headers": {"X-A": "é"}},
            "headers",
            "ASCII",
        ),
        (
            {"transport": "http", "url": "http://h", "headers": {"X-A": "1", "x-a": "2"}},
            "headers",
            "twice",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    staff: APIClient, fields: dict[str, Any], field: str, reason: str
) -> None:
    response = staff.post("/api/mcp-servers", {**FILES, **fields})
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert reason in json.dumps(response.json()[field]), response.json()
    assert not McpServer.objects.exists()


def test_a_bad_change_is_a_400_and_changes_nothing(staff: APIClient) -> None:
    before = staff.post("/api/mcp-servers", FILES).json()
    path = "/api/mcp-servers/files"
    for fields, field in [
        ({"transport": "http"}, "url"),
        ({"command": ""}, "command"),
        ({"env": {"OK": "1", "NOT OK": "2"}}, "env"),
        ({"tool_timeout": -1}, "tool_timeout"),
        ({"name": "No"}, "name"),
    ]:
        response = staff.patch(path, fields)
        assert response.status_code == 400 and field in response.json(), fields
    put = staff.put(path, {"command": "uvx"})
    assert put.status_code == 400 and {"name", "transport"} <= put.json().keys()
    assert staff.get(path).json() == before
    assert stored("files").env == FILES["env"]


def test_renaming_moves_the_server_and_a_taken_name_is_refused(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    staff.post("/api/mcp-servers", SEARCH)
    taken = staff.post("/api/mcp-servers", {**FILES, "command": "other"})
    assert taken.status_code == 400 and "already exists" in taken.json()["name"][0]

    clash = staff.patch("/api/mcp-servers/files", {"name": "search"})
    assert clash.status_code == 400 and "already exists" in clash.json()["name"][0]
    assert stored("files").command == "npx"

    moved = staff.patch("/api/mcp-servers/files", {"name": "disk"})
    assert moved.status_code == 200 and moved.json()["name"] == "disk"
    assert staff.get("/api/mcp-servers/files").status_code == 404
    assert staff.get("/api/mcp-servers/disk").status_code == 200
    assert stored("disk").env == FILES["env"]


def test_an_unknown_name_is_a_404(staff: APIClient, reader: APIClient) -> None:
    for client in (staff, reader):
        for method in ("get", "patch", "put", "delete"):
            response = getattr(client, method)("/api/mcp-servers/nothing", FILES)
            assert response.status_code in (403, 404), method
            if client is staff or method == "get":
                assert response.status_code == 404
                assert response["Content-Type"] == "application/json"
    # Not even a name's shape: the API's own JSON 404, not a page.
    odd = staff.get("/api/mcp-servers/a.b")
    assert odd.status_code == 404 and odd.json() == {"detail": "Not found."}


def test_switching_transport_drops_the_other_transports_settings(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    switched = staff.patch(
        "/api/mcp-servers/files", {"transport": "http", "url": "http://127.0.0.1:9000/mcp"}
    ).json()
    assert (switched["command"], switched["args"], switched["env"]) == ("", [], {})
    assert stored("files").env == {}
    both = staff.post("/api/mcp-servers", {**SEARCH, "name": "both", "command": "npx"}).json()
    assert both["command"] == "" and both["url"] == SEARCH["url"]


def test_enabled_servers_are_read_in_one_query(
    staff: APIClient, django_assert_num_queries: Any
) -> None:
    staff.post("/api/mcp-servers", FILES)
    staff.post("/api/mcp-servers", SEARCH)
    staff.post("/api/mcp-servers", {**FILES, "name": "off", "enabled": False})
    with django_assert_num_queries(1):
        servers = selectors.enabled_servers()
        seen = [
            (s.name, s.transport, s.command, s.args, s.env, s.url, s.headers, s.tool_timeout)
            for s in servers
        ]
        assert all(s.enabled and s.updated for s in servers)
    assert [row[0] for row in seen] == ["files", "search"]
    assert seen[0][4] == FILES["env"] and seen[1][6] == SEARCH["headers"]


def test_a_server_that_breaks_a_newer_rule_can_still_be_disabled(staff: APIClient) -> None:
    staff.post("/api/mcp-servers", FILES)
    McpServer.objects.filter(name="files").update(env={"NOT VALID": "x"})
    server = services.set_enabled(server=stored("files"), enabled=False)
    assert not stored("files").enabled
    with pytest.raises(ValidationError):
        services.set_enabled(server=server, enabled=True)
    assert not stored("files").enabled


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "files\n"}, "name"),  # what the field's own pattern lets through
        ({"command": "np\x00x"}, "command"),
        ({"env": {"K": "v\x00"}}, "env"),
        ({"env": {"API_KEY": MASK}}, "env"),
    ],
)
def test_the_services_refuse_what_the_api_refuses(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        services.create_server(**{**FILES, **fields})
    assert field in refused.value.message_dict
    assert not McpServer.objects.exists()


def test_the_schema_documents_the_servers(staff: APIClient) -> None:
    schema = staff.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert set(paths["/api/mcp-servers"]) == {"get", "post"}
    assert set(paths["/api/mcp-servers/{name}"]) == {"get", "put", "patch", "delete"}
    assert "/api/mcp-servers/" not in paths
    assert "403" in paths["/api/mcp-servers"]["post"]["responses"]
    out = schema["components"]["schemas"]["McpServerOut"]["properties"]
    assert {"name", "transport", "command", "args", "env", "url", "headers"} <= set(out)
    assert {"enabled", "tool_timeout"} <= set(out)
    assert out["env"]["additionalProperties"] == {"type": "string"}
