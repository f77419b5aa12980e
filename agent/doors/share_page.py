"""The page of a shared chat (`/shared/<id>/`): its snapshot, read-only, rendered as the chat
page renders a conversation, with who shared it and when, and a button that continues it
in a chat of the reader's own. Anyone the share does not name gets the site's 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from sessions_app import shares


@login_required
def shared(request: HttpRequest, share_id: str) -> HttpResponse:
    share = shares.visible_share(share_id=share_id, user=request.user)
    if share is None:
        raise Http404("no such shared chat")
    owner = share.owner
    context = {
        "share": share,
        "mine": share.owner_id == request.user.pk,
        "owner_name": owner.get_full_name() or owner.get_username(),
        # Handed to the page's script as data (`json_script`): the policy runs no inline script.
        "snapshot": {
            "id": share.pk,
            "title": share.title,
            "messages": share.messages,
            "continue_url": reverse("share-continue", args=[share.pk]),
        },
    }
    return render(request, "shared.html", context)
