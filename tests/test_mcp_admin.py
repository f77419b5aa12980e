"""MCP servers in the admin: its pages, its form under the model's rules, secrets shown as
names only and kept when a form sends their masks back, and its actions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django import forms
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from mcp_app import services
from mcp_app.masking import MASK
from mcp_app.models import McpServer

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:mcp_app_mcpserver_changelist")
ADD = reverse("admin:mcp_app_mcpserver_add")
API_KEY = "sk-admin-secret-4711"
BEARER = "Bearer admin-secret-0815"


def change_url(server: McpServer) -> str:
    return reverse("admin:mcp_app_mcpserver_change", args=[server.pk])


def make_files(**fields: Any) -> McpServer:
    fields = {
        "name": "files",
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "server-filesystem"],
        "env": {"API_KEY": API_KEY, "REGION": "eu"},
        **fields,
    }
    return services.create_server(**fields)


def make_search(**fields: Any) -> McpServer:
    fields = {
        "name": "search",
        "transport": "http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": BEARER},
        **fields,
    }
    return services.create_server(**fields)


def form_data(**fields: Any) -> dict[str, Any]:
    """The add form as a browser posts it: JSON fields as text, a ticked box as "on"."""
    data = {
        "name": "files",
        "transport": "stdio",
        "enabled": "on",
        "tool_timeout": "30",
        "command": "npx",
        "args": json.dumps(["-y", "server-filesystem"]),
        "env": json.dumps({"API_KEY": API_KEY}),
        "url": "",
        "headers": "{}",
    }
    data.update(fields)
    return {key: value for key, value in data.items() if value is not None}


def as_shown(client: Client, url: str) -> dict[str, Any]:
    """The change form's fields as the page shows them, to be posted back unchanged."""
    page = client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form[name].value()  # JSON fields as the text the page holds
        if isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        else:
            data[name] = "" if value is None else value
    return data


def test_the_list_and_change_pages_open(admin_client: Client) -> None:
    files, search = make_files(), make_search(enabled=False)
    listed = admin_client.get(CHANGELIST)
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "files" in page and "npx" in page and "https://mcp.example.com/mcp" in page
    assert API_KEY not in page and BEARER not in page
    names = lambda response: [s.name for s in response.context["cl"].result_list]  # noqa: E731
    assert names(admin_client.get(CHANGELIST, {"q": "example.com"})) == ["search"]
    assert names(admin_client.get(CHANGELIST, {"transport__exact": "stdio"})) == ["files"]
    assert names(admin_client.get(CHANGELIST, {"enabled__exact": "0"})) == ["search"]
    for server in (files, search):
        assert admin_client.get(change_url(server)).status_code == 200
    assert admin_client.get(ADD).status_code == 200


def test_a_server_added_in_the_admin_is_saved_whole(admin_client: Client) -> None:
    response = admin_client.post(ADD, form_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    server = McpServer.objects.get(name="files")
    assert server.env == {"API_KEY": API_KEY} and server.args == ["-y", "server-filesystem"]
    assert server.enabled and server.tool_timeout == 30


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "Not A Name"}, "name"),
        ({"command": ""}, "command"),
        ({"env": json.dumps({"BAD-NAME": "x"})}, "env"),
        ({"env": json.dumps({"API_KEY": MASK})}, "env"),  # nothing stored to keep
        ({"env": json.dumps(["API_KEY=x"])}, "env"),
        ({"args": json.dumps("-y")}, "args"),
        ({"tool_timeout": "0"}, "tool_timeout"),
        ({"transport": "http", "url": "mcp.example.com"}, "url"),
        ({"transport": "http", "url": "http://h", "headers": '{"A": "x\\ny"}'}, "headers"),
    ],
)
def test_the_form_keeps_to_the_models_rules(
    admin_client: Client, fields: dict[str, str], field: str
) -> None:
    response = admin_client.post(ADD, form_data(**fields))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not McpServer.objects.exists()


def test_the_change_form_shows_the_names_of_secrets_not_their_values(
    admin_client: Client,
) -> None:
    for server in (make_files(), make_search()):
        page = admin_client.get(change_url(server)).content.decode()
        assert API_KEY not in page and BEARER not in page
        assert MASK in page
    shown = as_shown(admin_client, change_url(McpServer.objects.get(name="files")))
    assert json.loads(shown["env"]) == {"API_KEY": MASK, "REGION": MASK}


def test_saving_the_form_with_masks_keeps_the_secrets(admin_client: Client) -> None:
    files, search = make_files(), make_search()
    for server in (files, search):
        data = {**as_shown(admin_client, change_url(server)), "tool_timeout": "90"}
        response = admin_client.post(change_url(server), data)
        assert response.status_code == 302, response.context["adminform"].form.errors
    files.refresh_from_db()
    search.refresh_from_db()
    assert files.tool_timeout == search.tool_timeout == 90
    assert files.env == {"API_KEY": API_KEY, "REGION": "eu"}
    assert search.headers == {"Authorization": BEARER}


def test_a_refused_form_shows_the_masks_again_not_the_secrets(admin_client: Client) -> None:
    files = make_files()
    data = {**as_shown(admin_client, change_url(files)), "tool_timeout": "0"}
    response = admin_client.post(change_url(files), data)
    assert response.status_code == 200
    assert "tool_timeout" in response.context["adminform"].form.errors
    assert API_KEY not in response.content.decode() and MASK in response.content.decode()
    files.refresh_from_db()
    assert files.env["API_KEY"] == API_KEY and files.tool_timeout == 30


def test_the_form_changes_adds_and_removes_secrets(admin_client: Client) -> None:
    files = make_files()
    data = as_shown(admin_client, change_url(files))
    data["env"] = json.dumps({"API_KEY": MASK, "DEBUG": "1"})  # REGION left out
    assert admin_client.post(change_url(files), data).status_code == 302
    files.refresh_from_db()
    assert files.env == {"API_KEY": API_KEY, "DEBUG": "1"}

    data["env"] = json.dumps({"API_KEY": "rotated", "DEBUG": MASK})
    assert admin_client.post(change_url(files), data).status_code == 302
    files.refresh_from_db()
    assert files.env == {"API_KEY": "rotated", "DEBUG": "1"}


def test_a_view_only_user_sees_the_names_of_secrets_alone(client: Client) -> None:
    files, search = make_files(), make_search()
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    client.force_login(viewer)
    for server in (files, search):
        page = client.get(change_url(server))
        assert page.status_code == 200
        text = page.content.decode()
        assert API_KEY not in text and BEARER not in text
    assert "API_KEY, REGION" in client.get(change_url(files)).content.decode()
    assert "Authorization" in client.get(change_url(search)).content.decode()
    assert client.post(change_url(files), {"name": "x"}).status_code == 403


def act(client: Client, action: str, servers: list[McpServer]) -> str:
    """Run a list action on `servers`; the text of the page it leads back to."""
    response = client.post(
        CHANGELIST, {"action": action, "_selected_action": [s.pk for s in servers]}, follow=True
    )
    assert response.status_code == 200
    return response.content.decode()


def test_disable_and_enable_actions(admin_client: Client) -> None:
    servers = [make_files(), make_search()]
    untouched = make_files(name="other")
    assert "Disabled 2 server(s)" in act(admin_client, "disable", servers)
    assert list(McpServer.objects.filter(enabled=True)) == [untouched]
    assert "Enabled 2 server(s)" in act(admin_client, "enable", servers)
    assert McpServer.objects.filter(enabled=True).count() == 3
    assert McpServer.objects.get(name="files").env["API_KEY"] == API_KEY


def test_enabling_a_server_that_breaks_a_rule_says_which(admin_client: Client) -> None:
    broken, fine = make_files(enabled=False), make_search(enabled=False)
    McpServer.objects.filter(pk=broken.pk).update(command="")
    page = act(admin_client, "enable", [broken, fine])
    assert "Files: A stdio server needs the command" in page  # capitalised by the admin
    assert "Enabled 1 server(s)" in page
    assert not McpServer.objects.get(pk=broken.pk).enabled
    assert McpServer.objects.get(pk=fine.pk).enabled
