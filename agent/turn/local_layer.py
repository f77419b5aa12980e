"""The channel layer of a site without Redis: channels' in-memory layer, tidied less often.

The in-memory layer looks through every channel and every group membership for expired
ones at each receive and each group send, so its cost grew with the square of the open
sockets: a tenth of a web process's time with two hundred chats. Here that sweep runs at
most once a second. Messages expire after a minute and memberships after a day, so a
second later changes nothing anyone sees.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer

SWEEP_SECONDS = 1.0


class LocalChannelLayer(InMemoryChannelLayer):
    swept = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self.swept >= SWEEP_SECONDS:
            self.swept = now
            super()._clean_expired()
