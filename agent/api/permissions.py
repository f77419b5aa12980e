"""Who may see what: small functions the views call."""

from __future__ import annotations

from typing import Any

from sessions_app.models import Session


def owns_session(user: Any, session: Session) -> bool:
    return bool(user.is_authenticated and session.owner_id == user.pk)
