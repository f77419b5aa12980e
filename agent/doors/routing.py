from django.urls import path, re_path

from agent.doors.chat import ChatConsumer
from sessions_app import keys  # noqa: F401  (registers the `chat` path converter)

websocket_urlpatterns = [
    path("ws/chat/<chat:key>/", ChatConsumer.as_asgi()),
    # Any other chat path reaches the consumer without a key, so that it is refused the way
    # the page refuses it (close 4404, after the login check) rather than by a routing error.
    re_path(r"^ws/chat/", ChatConsumer.as_asgi()),
]
