"""The model a turn (or a consolidation) talks to, as the settings describe it."""

from __future__ import annotations

from agent.conf import AgentSettings
from agent.llm import LLMConfig
from agent.prices import price_of


def llm_config(conf: AgentSettings, model: str) -> LLMConfig:
    price = price_of(model, conf.model_prices)
    return LLMConfig(
        model=model,
        api_base=conf.api_base,
        api_key=conf.api_key,
        temperature=conf.temperature,
        max_tokens=conf.max_tokens,
        context_window=conf.context_window,
        timeout=conf.llm_timeout,
        max_retries=conf.llm_max_retries,
        retry_budget=conf.llm_retry_budget,
        backend=conf.llm_backend,
        openai_base=conf.openai_base_url,
        openai_key=conf.openai_api_key,
        price=(price.input, price.output) if price is not None else None,
        vision_models=conf.vision_models,
    )
