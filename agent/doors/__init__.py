"""Doors: where a message comes in by some protocol and events go back out by it.

The web chat's WebSocket (`chat`), the chat page (`pages`), the REST API (`api`), the
command line's printers (`terminal`, used by `management/commands/agent.py`) and the
django-q2 worker's task functions (`worker`). A door translates its protocol into one call
of the turn service (`agent.turn`) and never holds agent logic.
"""
