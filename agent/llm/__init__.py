"""The model adapter: one interface over a lean OpenAI-compatible client and litellm.

`client` is the interface the loop uses; `wire` speaks the OpenAI chat-completions
protocol itself; `litellm_adapter` is the only module that imports litellm, and only when
a model needs it; `error_kinds` sorts failures into kinds; `retries` retries the transient
ones (with tenacity, loaded once a call fails); `model_table` reads litellm's model table
without importing litellm.
"""

from agent.llm.client import LLM, LLMConfig, LLMResponse, ToolCall, needs_litellm
from agent.llm.error_kinds import LLMError

__all__ = ["LLM", "LLMConfig", "LLMError", "LLMResponse", "ToolCall", "needs_litellm"]
