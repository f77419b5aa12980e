"""The turn service: `run_turn`, the one call every door makes, and what it needs.

Slash commands (`slash`), per-session locks (`locks`), the run watcher that delivers stops
and heartbeats (`watch`), the ordered message writer (`message_log`), cross-process fan-out
(`fanout`), the async boundary to the data layer (`store`) and queued turns (`runs`).
"""
