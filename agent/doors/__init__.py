"""Doors: where a message comes in by some protocol and events go back out by it.

The web chat's WebSocket (`chat`), the chat page (`pages`), the REST API (`api`), the
command line's printers (`terminal`, used by `management/commands/agent.py`), how the
worker cluster stops in time (`cluster`) and the names the worker knew its jobs by before
(`worker`). A door translates its protocol into calls of the turn package's interface
(`agent.turn`) and never holds agent logic.
"""
