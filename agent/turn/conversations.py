"""What a door keeps of its clients' conversations, for the next request to find: the
session a conversation continues (by a digest the door makes of its messages) and the
answers a client may read again or continue from (the Responses API's)."""

from __future__ import annotations

from agent.turn.db import on_db
from sessions_app import clients

conversation_session = on_db(clients.conversation_session)
mark_conversation = on_db(clients.mark_conversation)
keep_response = on_db(clients.keep_response)
stored_response = on_db(clients.stored_response)
