"""MCP servers over HTTP pass the network guard that web_fetch does, unless the operator
marks one `trusted`: an untrusted server on loopback (or a name that resolves there) is
refused with an error naming the setting and never reached; marked trusted it connects.
The flag is a field of the model, the admin and `/api/mcp-servers` (staff only), and stdio
servers are unaffected."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agent.tools import ToolContext
from agent.tools.base import ToolError
from agent.tools.guards import AddressGuard
from agent.tools.mcp import McpHub, McpServerConfig, mcp_hub
from agent.turn import SessionRef, run_turn
from mcp_app import services
from mcp_app.models import McpServer
from tests.llm_server import ScriptedLLM
from tests.test_mcp_client import by_name, running_http_demo, stdio_demo
from tests.test_ssrf import resolver
from tests.test_ssrf_parse import Tripwire

LOOPBACK = ipaddress.ip_address("127.0.0.1")


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_http_demo(tmp_path_factory.mktemp("mcp-trusted") / "sleep.log") as url:
        yield url


@pytest.fixture
def tripwire() -> Iterator[Tripwire]:
    with Tripwire("127.0.0.1") as running:
        yield running


@pytest.fixture
def hubs() -> Iterator[list[McpHub]]:
    made: list[McpHub] = []
    yield made
    for hub in made:
        hub.shutdown()


async def call_error(hub: McpHub, server: str) -> str:
    with pytest.raises(ToolError) as caught:
        await hub.call_tool(server, "echo", {"text": "x"})
    return str(caught.value)


# -- the hub ---------------------------------------------------------------------------------


async def test_an_untrusted_loopback_server_is_refused_naming_the_setting(
    tripwire: Tripwire, hubs: list[McpHub], caplog: pytest.LogCaptureFixture
) -> None:
    hub = McpHub()
    hubs.append(hub)
    hub.configure([McpServerConfig("inside", "http", url=f"http://127.0.0.1:{tripwire.port}/mcp")])

    assert await hub.tools() == []
    error = await call_error(hub, "inside")
    assert "127.0.0.1 is a loopback address" in error
    assert "not marked trusted" in error and "`trusted`" in error
    assert "Traceback" not in error and "GuardError" not in error
    assert "not marked trusted" in caplog.text  # the operator's log says so too
    assert tripwire.hits == []


async def test_a_trusted_loopback_server_connects(demo_url: str, hubs: list[McpHub]) -> None:
    hub = McpHub()
    hubs.append(hub)
    hub.configure([McpServerConfig("inside", "http", url=demo_url, trusted=True)])
    tools = by_name(await hub.tools())
    assert await tools["mcp_inside_echo"].execute(ToolContext.detached(), text="hi") == "hi"


async def test_a_name_that_resolves_to_loopback_is_refused(
    tripwire: Tripwire, hubs: list[McpHub]
) -> None:
    """The guard judges the address a name resolves to, and connects to no other."""
    lookup = resolver({"mcp.example.com": ["127.0.0.1"]})
    hub = McpHub(guard=AddressGuard(resolver=lookup))
    hubs.append(hub)
    url = f"http://mcp.example.com:{tripwire.port}/mcp"
    hub.configure([McpServerConfig("named", "http", url=url)])

    error = await call_error(hub, "named")
    assert "mcp.example.com (127.0.0.1) is a loopback address" in error
    assert "not marked trusted" in error
    assert lookup.calls and tripwire.hits == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "host", ["%31%32%37.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "169.254.169.254"]
)
async def test_disguised_internal_addresses_are_refused_too(
    tripwire: Tripwire, hubs: list[McpHub], host: str
) -> None:
    hub = McpHub(guard=AddressGuard(resolver=resolver({})))
    hubs.append(hub)
    port = "" if host.startswith("169") else f":{tripwire.port}"
    hub.configure([McpServerConfig("odd", "http", url=f"http://{host}{port}/mcp")])
    error = await call_error(hub, "odd")
    assert "address; only public internet addresses" in error and "not marked trusted" in error
    assert tripwire.hits == []


async def test_an_untrusted_server_speaks_through_the_guarded_client(
    demo_url: str, hubs: list[McpHub]
) -> None:
    """With a policy that lets the demo's address through, the whole session (listing,
    calls, the event stream) works over the guarded connections."""
    hub = McpHub(guard=AddressGuard(is_allowed=lambda ip: ip == LOOPBACK))
    hubs.append(hub)
    hub.configure([McpServerConfig("guarded", "http", url=demo_url, headers=(("X-Test", "1"),))])
    tools = by_name(await hub.tools())
    ctx = ToolContext.detached()
    assert await tools["mcp_guarded_echo"].execute(ctx, text="through") == "through"
    assert await tools["mcp_guarded_add"].execute(ctx, a=2, b=3) == "5"


async def test_stdio_servers_are_not_guarded(hubs: list[McpHub]) -> None:
    """A stdio server is a program, not an address: the default hub, with its guard,
    starts it as ever."""
    hub = McpHub()
    hubs.append(hub)
    hub.configure([stdio_demo("local")])
    tools = by_name(await hub.tools())
    assert await tools["mcp_local_add"].execute(ToolContext.detached(), a=1, b=1) == "2"


def test_the_flag_is_part_of_the_config() -> None:
    plain = McpServerConfig("x", "http", url="http://10.0.0.1/mcp")
    trusted = McpServerConfig("x", "http", url="http://10.0.0.1/mcp", trusted=True)
    assert plain.trusted is False and plain != trusted  # the hub reconnects on a change
    assert "trusted=True" in repr(trusted)


# -- the model, the API, the admin -----------------------------------------------------------


def api_client(user: User) -> APIClient:
    client = APIClient()
    client.default_format = "json"
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


WEB = {"name": "web", "transport": "http", "url": "http://10.1.2.3:8000/mcp"}


@pytest.mark.django_db
def test_a_server_is_untrusted_until_staff_say_otherwise(ada: User) -> None:
    staff = api_client(User.objects.create_user("root", is_staff=True))
    reader = api_client(ada)

    created = staff.post("/api/mcp-servers", WEB)
    assert created.status_code == 201 and created.json()["trusted"] is False
    assert McpServer.objects.get(name="web").trusted is False

    assert reader.patch("/api/mcp-servers/web", {"trusted": True}).status_code == 403
    assert McpServer.objects.get(name="web").trusted is False

    changed = staff.patch("/api/mcp-servers/web", {"trusted": True})
    assert changed.status_code == 200 and changed.json()["trusted"] is True
    assert reader.get("/api/mcp-servers/web").json()["trusted"] is True  # visible to all
    bad = staff.patch("/api/mcp-servers/web", {"trusted": "maybe"})
    assert bad.status_code == 400 and "trusted" in bad.json()


@pytest.mark.django_db
def test_a_stdio_server_is_never_marked_trusted() -> None:
    server = services.create_server(name="files", transport="stdio", command="npx", trusted=True)
    assert server.trusted is False
    web = services.create_server(**WEB, trusted=True)
    switched = services.update_server(server=web, transport="stdio", command="npx")
    assert switched.trusted is False


@pytest.mark.django_db
def test_the_admin_sets_the_flag(admin_client: Client) -> None:
    data = {
        "name": "web",
        "transport": "http",
        "enabled": "on",
        "trusted": "on",
        "tool_timeout": "30",
        "url": "http://mcp.internal:8000/mcp",
        "args": "[]",
        "env": "{}",
        "headers": "{}",
    }
    response = admin_client.post(reverse("admin:mcp_app_mcpserver_add"), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    server = McpServer.objects.get(name="web")
    assert server.trusted is True
    page = admin_client.get(reverse("admin:mcp_app_mcpserver_change", args=[server.pk]))
    assert 'name="trusted"' in page.content.decode()
    assert "public internet addresses only" in page.content.decode()


# -- a turn ----------------------------------------------------------------------------------


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
async def test_a_turn_leaves_an_untrusted_loopback_server_out_until_it_is_trusted(
    llm: ScriptedLLM, ada: User, demo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agent.tools.mcp")
    server = await sync_to_async(services.create_server)(name="web", transport="http", url=demo_url)
    try:
        llm.reply("No web tools.")
        await run_turn(SessionRef("web:t1", ada), "hello", channel="web")
        assert not {n for n in offered(llm.requests[-1]) if n.startswith("mcp_web_")}
        assert "not marked trusted" in caplog.text

        await sync_to_async(services.update_server)(server=server, trusted=True)
        llm.tool_call("mcp_web_echo", {"text": "reached"}).reply("Done.")
        result = await run_turn(SessionRef("web:t1", ada), "echo", channel="web")
        assert result.success and "mcp_web_echo" in offered(llm.requests[-2])
    finally:
        mcp_hub().configure([])
