"""The models of sessions_app, one module per concern; each is imported here, where Django
and the rest of the project look for them (`from sessions_app.models import Run`).

`validate_tool_patterns` is named here as well: the migrations refer to it by this path.
"""

from agent.tool_fields import validate_tool_patterns
from sessions_app.models.clients import ConversationMark, StoredResponse
from sessions_app.models.preferences import UserPreferences
from sessions_app.models.runs import MARK_ALIVE_SECONDS, STALE_AFTER_SECONDS, Approval, Run
from sessions_app.models.sessions import Memory, Message, Relayed, Session
from sessions_app.models.shares import ChatShare
from sessions_app.models.usage import DailyUsage, SpendingHold, UserBudget

__all__ = [
    "MARK_ALIVE_SECONDS",
    "STALE_AFTER_SECONDS",
    "Approval",
    "ChatShare",
    "ConversationMark",
    "DailyUsage",
    "Memory",
    "Message",
    "Relayed",
    "Run",
    "Session",
    "SpendingHold",
    "StoredResponse",
    "UserBudget",
    "UserPreferences",
    "validate_tool_patterns",
]
