"""A person's settings: the operator's, narrowed by the person's policy (`teams_app.policy`).

Every turn reads its settings here, once, when it starts: whichever door or background run
started it, the models it may use, the tools its agent is offered, what waits for a yes,
the turn rate and whether `exec` has the network all follow the person's teams. Nothing
can widen what the operator set: the policy is computed under that ceiling.
"""

from __future__ import annotations

import dataclasses

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from agent.conf import AgentSettings, agent_settings
from agent.turn.db import on_db
from agent.turn.refusals import InvalidInput
from teams_app.policy import OPERATOR, Policy, effective_policy, whose

Person = AbstractBaseUser | AnonymousUser | None


class NoModelAllowed(InvalidInput):
    def __init__(self, source: str) -> None:
        rule = whose(source)
        super().__init__(
            f"{rule[0].upper()}{rule[1:]} allows none of the models this site offers; ask "
            "your team's admin",
            field="model",
        )


def under(conf: AgentSettings, policy: Policy) -> AgentSettings:
    """`conf` as it applies to the person whose policy is `policy`."""
    models = policy.models
    default = conf.model if conf.model in models else (models[0] if models else "")
    return dataclasses.replace(
        conf,
        model=default,
        models=models,
        approve_tools=policy.approve_patterns,
        turn_rate=policy.turn_rate,
        exec_network=policy.exec_network,
        user_daily_budget=float(policy.member_daily_budget or 0),
        allowed_tools=policy.tools,
        hidden_mcp_servers=policy.hidden_mcp_servers,
        hidden_skills=policy.hidden_skills,
        models_from=policy.models_from,
        tools_from=policy.tools_from,
    )


def settings_for(person: Person, conf: AgentSettings | None = None) -> AgentSettings:
    """The settings of `person`'s turns (sync: a few queries); the operator's for no one."""
    conf = conf or agent_settings()
    if person is None or not getattr(person, "pk", None):
        return conf
    return under(conf, effective_policy(person, conf))


async def person_settings(person: Person) -> AgentSettings:
    """`settings_for`, from async code."""
    if person is None or not getattr(person, "pk", None):
        return agent_settings()
    return await on_db(settings_for)(person)


def refuse_without_models(conf: AgentSettings) -> None:
    """A person whose policy leaves them no model the site offers cannot start a turn; the
    operator's own lack of a model is `ModelNotConfigured`, said elsewhere."""
    if not conf.models and conf.models_from != OPERATOR:
        raise NoModelAllowed(conf.models_from)


def refused_tools(names: list[str], conf: AgentSettings) -> str:
    """Why some of `names` are not the person's to use (`conf` is theirs), or ""."""
    if conf.allowed_tools is None:
        return ""
    refused = [name for name in names if name not in conf.allowed_tools]
    if not refused:
        return ""
    listed = ", ".join(refused)
    return f"{'these tools are' if len(refused) > 1 else 'the tool'} {listed} " + (
        f"{'are' if len(refused) > 1 else 'is'} not allowed by {whose(conf.tools_from)}"
    )
