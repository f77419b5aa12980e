import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django_asgi_app = get_asgi_application()

# Imported after the app registry is ready: these modules touch models and settings.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agent.conf import agent_settings  # noqa: E402
from agent.doors.routing import websocket_urlpatterns  # noqa: E402
from agent.doors.ws_auth import SameSiteOriginValidator, TokenAuthMiddleware  # noqa: E402
from agent.llm.client import needs_litellm  # noqa: E402
from agent.llm.litellm_adapter import preload  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameSiteOriginValidator(
            AuthMiddlewareStack(TokenAuthMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# A model reached through litellm would make the first turn wait seconds for its import;
# the lean path has nothing to wait for.
_conf = agent_settings()
if _conf.model and needs_litellm(_conf.model, _conf.llm_backend):
    preload()
