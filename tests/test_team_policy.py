"""A team's policy in the turn: what its members' agents are offered and may do, whichever
door or background run starts the turn. Over real HTTP in `test_team_policy_live.py`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from agent.turn import InvalidInput, OverBudget, SessionRef, run_cron_job, run_turn, settings_for
from cron_app import services as cron_services
from sessions_app.models import DailyUsage, Run
from teams_app.models import PersonalPolicy
from teams_app.policy import effective_policy
from teams_app.services import create_team, set_admins, set_members
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


@pytest.fixture
def member(db: None) -> User:
    return User.objects.create_user("mia", password="pw-mia-123")


def team(slug: str, *members: User, **policy: Any) -> Any:
    made = create_team(slug=slug, name=slug.title(), **policy)
    set_members(team=made, users=members)
    return made


async def test_a_team_without_exec_keeps_it_from_its_members_agents(
    llm: ScriptedLLM, member: User
) -> None:
    await sync_to_async(team)("support", member, tools=["read_file", "web_fetch"])
    llm.reply("ok")
    await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert offered(llm.requests[0]) == {"read_file", "web_fetch"}


async def test_a_person_in_no_team_gets_every_tool(llm: ScriptedLLM, member: User) -> None:
    llm.reply("ok")
    await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert {"exec", "read_file", "web_fetch"} <= offered(llm.requests[0])


async def test_several_teams_give_the_union_of_their_tools(llm: ScriptedLLM, member: User) -> None:
    await sync_to_async(team)("support", member, tools=["read_file"])
    await sync_to_async(team)("platform", member, tools=["exec"])
    llm.reply("ok")
    await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert offered(llm.requests[0]) == {"read_file", "exec"}


async def test_a_model_the_team_does_not_allow_is_refused_and_its_own_is_the_default(
    llm: ScriptedLLM, member: User, settings: Any
) -> None:
    settings.AGENT_MODELS = ["openai/small"]
    await sync_to_async(team)("support", member, allowed_models=["openai/small"])
    with pytest.raises(InvalidInput) as caught:
        await run_turn(SessionRef("api:t", member), "hi", channel="api", model="openai/scripted")
    assert str(caught.value) == (
        "the model openai/scripted is not available to you (your team support's policy "
        "allows: openai/small)"
    )
    assert llm.requests == []
    llm.reply("ok")
    await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert llm.requests[0]["model"] == "small"


async def test_no_team_can_allow_a_model_the_operator_does_not(
    llm: ScriptedLLM, member: User
) -> None:
    await sync_to_async(team)("support", member, allowed_models=["openai/gpt-9"])
    with pytest.raises(InvalidInput, match="allows none of the models"):
        await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert llm.requests == []


async def test_a_tool_the_team_makes_wait_asks_its_member(
    llm: ScriptedLLM, member: User, workspace: Any
) -> None:
    await sync_to_async(team)("platform", member, approve_tools=["write_file"])
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("done")
    result = await run_turn(SessionRef("web:t", member), "write it", channel="web")
    assert result.status == Run.Status.WAITING
    assert [call["name"] for call in result.pending] == ["write_file"]


async def test_the_team_budget_stops_every_member(
    llm: ScriptedLLM, member: User, settings: Any
) -> None:
    other = await User.objects.acreate_user("noa", password="pw-noa-123")
    await sync_to_async(team)("support", member, other, team_daily_budget=Decimal("1.00"))
    await DailyUsage.objects.acreate(
        owner=other, day=timezone.now().date(), model="openai/scripted", priced_cost=Decimal("1.5")
    )
    with pytest.raises(OverBudget) as caught:
        await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert "Your team support's daily budget of $1.00 is spent ($1.50" in str(caught.value)
    assert llm.requests == []


async def test_the_member_budget_is_the_most_generous_teams_under_the_site(
    member: User, settings: Any
) -> None:
    settings.AGENT_USER_DAILY_BUDGET = 5.0
    await sync_to_async(team)("a", member, member_daily_budget=Decimal("2"))
    await sync_to_async(team)("b", member, member_daily_budget=Decimal("3"))
    policy = await sync_to_async(effective_policy)(member)
    assert (policy.member_daily_budget, policy.member_daily_budget_from) == (Decimal(3), "team:b")
    await sync_to_async(team)("c", member, member_daily_budget=Decimal("50"))
    policy = await sync_to_async(effective_policy)(member)
    assert (policy.member_daily_budget, policy.member_daily_budget_from) == (
        Decimal(5),
        "operator",
    )


async def test_exec_keeps_off_the_network_for_a_team_that_says_so(
    member: User, settings: Any
) -> None:
    settings.AGENT_EXEC_NETWORK = True
    await sync_to_async(team)("support", member, exec_network=False)
    assert not (await sync_to_async(settings_for)(member)).exec_network
    other = await User.objects.acreate_user("noa", password="pw-noa-123")
    assert (await sync_to_async(settings_for)(other)).exec_network
    settings.AGENT_EXEC_NETWORK = False
    await sync_to_async(team)("platform", other, exec_network=True)
    assert not (await sync_to_async(settings_for)(other)).exec_network


async def test_a_personal_policy_stands_in_for_the_teams(llm: ScriptedLLM, member: User) -> None:
    await sync_to_async(team)("support", member, tools=["read_file"])
    await PersonalPolicy.objects.acreate(user=member, tools=["read_file", "list_dir"])
    llm.reply("ok")
    await run_turn(SessionRef("api:t", member), "hi", channel="api")
    assert offered(llm.requests[0]) == {"read_file", "list_dir"}


async def test_a_cron_run_keeps_to_the_owners_team(llm: ScriptedLLM, member: User) -> None:
    await sync_to_async(team)("support", member, tools=["read_file"])
    job = await sync_to_async(cron_services.create_job)(
        owner=member, message="check", session="web:news", kind="every", every_seconds=3600
    )
    llm.reply("checked")
    assert await run_cron_job(job.pk, scheduled=False) == "succeeded"
    assert offered(llm.requests[0]) == {"read_file"}


def test_the_api_refuses_a_tool_the_team_does_not_allow(llm: ScriptedLLM, member: User) -> None:
    team("support", member, tools=["read_file"])
    client = APIClient()
    client.force_authenticate(member)
    answer = client.post("/api/tasks", {"prompt": "hi", "tools": ["exec"]}, format="json")
    assert answer.status_code == 400
    assert answer.json()["tools"] == ["the tool exec is not allowed by your team support's policy"]
    tools = client.get("/api/tools").json()
    assert [tool["name"] for tool in tools] == ["read_file"]
    assert llm.requests == []


def test_teams_api_staff_make_teams_members_cannot(member: User, settings: Any) -> None:
    staff = User.objects.create_user("sam", password="pw-sam-123", is_staff=True)
    client = APIClient()
    client.force_authenticate(member)
    body = {"slug": "support", "members": ["mia"], "policy": {"tools": ["read_file"]}}
    assert client.post("/api/teams", body, format="json").status_code == 403
    assert client.get("/api/teams").status_code == 403
    client.force_authenticate(staff)
    made = client.post("/api/teams", body, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["members"] == ["mia"]
    assert made.json()["policy"]["tools"] == ["read_file"]
    assert made.json()["policy"]["models"] is None

    client.force_authenticate(member)
    me = client.get("/api/me").json()
    assert me["teams"] == [{"slug": "support", "name": "support", "admin": False}]
    assert me["policy"]["tools"] == {"value": ["read_file"], "source": "team:support"}
    assert me["policy"]["models"] == {"value": ["openai/scripted"], "source": "operator"}
    assert client.get("/api/teams/support").status_code == 404


def test_a_team_admin_changes_their_own_team_within_the_ceiling(member: User) -> None:
    other = User.objects.create_user("noa", password="pw-noa-123")
    mine = team("support", member, synced=False)
    set_admins(team=mine, users=[member])
    team("platform", other)
    client = APIClient()
    client.force_authenticate(member)
    assert [t["slug"] for t in client.get("/api/teams").json()] == ["support"]
    assert client.get("/api/teams/platform").status_code == 404
    assert client.patch("/api/teams/platform", {"name": "x"}, format="json").status_code == 404
    changed = client.patch(
        "/api/teams/support",
        {"members": ["mia", "noa"], "policy": {"approve_tools": ["exec"]}},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["members"] == ["mia", "noa"]
    refused = client.patch(
        "/api/teams/support", {"policy": {"exec_network": True, "models": ["x/y"]}}, format="json"
    )
    assert refused.status_code == 400
    assert "AGENT_EXEC_NETWORK" in refused.json()["policy"]["exec_network"][0]
    assert "does not offer x/y" in refused.json()["policy"]["models"][0]
    assert client.patch("/api/teams/support", {"admins": ["noa"]}, format="json").status_code == 403
    assert client.patch("/api/teams/support", {"name": "Ours"}, format="json").status_code == 403
    assert client.delete("/api/teams/support").status_code == 403

    from skills_app.models import Skill

    Skill.objects.create(name="public", description="Everyone's", content="x")
    taken = client.patch("/api/teams/support", {"skills": ["public"]}, format="json")
    assert taken.status_code == 400
    assert "picks from what their teams have" in taken.json()["skills"][0]


async def test_the_socket_offers_the_teams_models_and_refuses_others(
    llm: ScriptedLLM, token: str, settings: Any
) -> None:
    from tests.ws import open_chat, receive_until

    settings.AGENT_MODELS = ["openai/small"]
    ada = await User.objects.aget(username="ada")
    await sync_to_async(team)("support", ada, allowed_models=["openai/small"], tools=["list_dir"])
    socket, history = await open_chat("p1", token)
    assert history["model"] == "openai/small"
    await socket.send_json_to({"type": "model", "model": "openai/scripted"})
    refused = await receive_until(socket, "error")
    assert (
        "not available to you (your team support's policy allows: openai/small)"
        in (refused[-1]["message"])
    )
    llm.reply("hi")
    await socket.send_json_to({"type": "message", "content": "hello"})
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()
    assert llm.requests[0]["model"] == "small"
    assert offered(llm.requests[0]) == {"list_dir"}


async def test_the_socket_is_refused_a_turn_once_the_team_budget_is_spent(
    llm: ScriptedLLM, token: str
) -> None:
    from tests.ws import open_chat, receive_until

    ada = await User.objects.aget(username="ada")
    await sync_to_async(team)("support", ada, team_daily_budget=Decimal("0.50"))
    await DailyUsage.objects.acreate(
        owner=ada, day=timezone.now().date(), model="openai/scripted", priced_cost=Decimal("0.5")
    )
    socket, _ = await open_chat("p2", token)
    await socket.send_json_to({"type": "message", "content": "hello"})
    frames = await receive_until(socket, "error")
    await socket.disconnect()
    assert "team support's daily budget of $0.50 is spent" in frames[-1]["message"]
    assert llm.requests == []


def test_the_command_line_keeps_to_the_users_team(
    llm: ScriptedLLM, member: User, settings: Any, capsys: Any
) -> None:
    from django.core.management import CommandError, call_command

    settings.AGENT_MODELS = ["openai/small"]
    team("support", member, allowed_models=["openai/small"], tools=["read_file"])
    llm.reply("from the small one")
    # Verbosity 2: below it the command quiets the `agent` loggers, for the whole process.
    call_command("agent", "-m", "hi", "--user", "mia", verbosity=2)
    assert llm.requests[0]["model"] == "small"
    assert offered(llm.requests[0]) == {"read_file"}
    with pytest.raises(CommandError, match="not available to you"):
        call_command(
            "agent", "-m", "hi", "--user", "mia", "--model", "openai/scripted", verbosity=2
        )
    assert len(llm.requests) == 1


def test_the_models_api_lists_the_teams_models_only(member: User, settings: Any) -> None:
    settings.AGENT_MODELS = ["openai/small", "openai/big"]
    team("support", member, allowed_models=["openai/small"])
    client = APIClient()
    client.force_authenticate(member)
    listed = client.get("/api/models").json()
    assert listed == {"default": "openai/small", "models": ["openai/small"]}


async def test_a_sub_agent_keeps_to_its_parents_team(llm: ScriptedLLM, member: User) -> None:
    await sync_to_async(team)("support", member, tools=["subagent", "list_dir"])
    llm.tool_call("subagent", {"task": "look around"}).reply("looked").reply("all done")
    await run_turn(SessionRef("web:s", member), "delegate", channel="web")
    assert offered(llm.requests[0]) == {"subagent", "list_dir"}
    assert offered(llm.requests[1]) == {"list_dir"}


async def test_a_skill_assigned_to_a_team_is_its_members_alone(
    llm: ScriptedLLM, member: User
) -> None:
    from skills_app.models import Skill

    other = await User.objects.acreate_user("noa", password="pw-noa-123")
    skill = await Skill.objects.acreate(
        name="refunds", description="How support handles refunds", content="Be kind."
    )
    support = await sync_to_async(team)("support", member)
    await sync_to_async(team)("platform", other)
    await sync_to_async(support.skills.add)(skill)
    llm.reply("a").reply("b")
    await run_turn(SessionRef("api:s", member), "hi", channel="api")
    await run_turn(SessionRef("api:s", other), "hi", channel="api")
    assert "refunds" in llm.requests[0]["messages"][0]["content"]
    assert "refunds" not in llm.requests[1]["messages"][0]["content"]
