"""A client's generation parameters against what its model takes: one that litellm says the
provider does not take is refused before anything is recorded, naming it; a server spoken
to directly gets them all, and answers for itself."""

from __future__ import annotations

import pytest

from agent.turn import InvalidInput, TurnOptions, prepare_options

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

CLAUDE = "anthropic/claude-3-5-sonnet-20240620"


async def test_a_parameter_the_provider_does_not_take_is_refused_by_name(settings) -> None:
    settings.AGENT_MODELS = [CLAUDE]
    options = TurnOptions(tools=False, params=(("stop", ["END"]), ("seed", 7)))
    with pytest.raises(InvalidInput) as refused:
        await prepare_options(options, owner=None, model=CLAUDE)
    assert refused.value.field == "seed" and CLAUDE in str(refused.value)
    # What it takes passes.
    taken = TurnOptions(tools=False, params=(("stop", ["END"]), ("top_p", 0.5)))
    assert (await prepare_options(taken, owner=None, model=CLAUDE)).params == taken.params


async def test_a_server_spoken_to_directly_gets_every_parameter() -> None:
    options = TurnOptions(tools=False, params=(("seed", 7), ("logit_bias", {"1": -1})))
    ready = await prepare_options(options, owner=None, model="openai/scripted")
    assert ready.params == options.params and ready.prepared_for == "openai/scripted"
