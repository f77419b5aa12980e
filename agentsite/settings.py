"""Settings: the one place that reads the environment (and `.env` in the project root)."""

from __future__ import annotations

import os
import re
import secrets
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from agent.conf import read_settings

BASE_DIR = Path(__file__).resolve().parent.parent

# litellm fetches its price list over the network at import unless told otherwise; the
# adapter imports it lazily, but the flag must be in the process environment before then.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DATA_DIR = Path(env.str("AGENT_DATA_DIR", default=str(BASE_DIR / "data"))).resolve()
# The agent's own settings, each a Django setting of its own name (see agent.conf).
try:
    _AGENT = read_settings(env, defaults={"AGENT_WORKSPACE": str(BASE_DIR / "workspace")})
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None
globals().update(_AGENT)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
# `make install` writes a random key here, so that a local install has one of its own
# rather than a well-known one that would let anybody forge its sessions.
SECRET_KEY_FILE = DATA_DIR / "secret_key"
if not SECRET_KEY and SECRET_KEY_FILE.exists():
    SECRET_KEY = SECRET_KEY_FILE.read_text().strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            f"No secret key: set DJANGO_SECRET_KEY, or run `make install`, which writes one "
            f"to {SECRET_KEY_FILE}. For example: export DJANGO_SECRET_KEY=$(python3 -c "
            "'import secrets; print(secrets.token_urlsafe(50))')"
        )
    SECRET_KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
    SECRET_KEY_FILE.touch(mode=0o600)
    SECRET_KEY_FILE.write_text(secrets.token_urlsafe(50))
    SECRET_KEY = SECRET_KEY_FILE.read_text().strip()
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
CSRF_FAILURE_VIEW = "agentsite.error_pages.csrf_failure"
# Cookies travel over HTTPS only once the site answers to a name other than this machine's
# loopback (it is then behind TLS); the local default is plain http://127.0.0.1.
_LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool(
    "DJANGO_SECURE_COOKIES", default=not set(ALLOWED_HOSTS) <= _LOOPBACK
)

# Every process loads these apps, the command line too, so none may import what only the web
# server needs. No `daphne` app, whose import loads Twisted: daphne runs as a process of its
# own (`manage.py serve`), and `agentsite`, listed before staticfiles so that its command
# wins, makes `runserver` daphne's. The admin finds the `admin.py` modules when the URLconf
# loads (agentsite/urls.py).
INSTALLED_APPS = [
    "agentsite",
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "axes",
    "sessions_app",
    "cron_app",
    "skills_app",
    "mcp_app",
    "teams_app",
    "auditlog",
    "mozilla_django_oidc",
    "agent",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "agentsite.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Who made each change the audit log records (django-auditlog).
    "agentsite.audit_actor.AuditActorMiddleware",
    # Last, as axes asks: it turns a sign-in that axes refused into the locked-out page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "agentsite.urls"
WSGI_APPLICATION = "agentsite.wsgi.application"
ASGI_APPLICATION = "agentsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_SQLITE_URL = f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
DATABASES = {"default": env.db_url("DATABASE_URL", default=_SQLITE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # WAL lets the web process, the worker and the command line read while one writes;
    # IMMEDIATE transactions take the write lock up front instead of failing on upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
    # A file needs no server to reconnect to, and opening it again (with its pragmas) after
    # every request or socket's database call was a tenth of a busy web process's time.
    DATABASES["default"]["CONN_MAX_AGE"] = None
    # Tests use a file too: in-memory SQLite locks whole tables between threads instead of
    # waiting, unlike the WAL file every real run uses.
    DATABASES["default"].setdefault("TEST", {"NAME": str(DATA_DIR / "test.sqlite3")})
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=0))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
# WhiteNoise serves static files from where the finders find them: the site runs as one
# daphne process with no web server in front, and needs no collectstatic step.
WHITENOISE_USE_FINDERS = True

# Content-Security-Policy on every response (django-csp; `agentsite.csp` adds the chat's
# WebSocket origin to connect-src). Scripts, styles, images and fonts come from the site
# itself, images also as `data:` URLs, and no page needs an inline script, event handler or
# style. A page the model's text gets into can then neither run a script nor make the
# browser fetch a remote address: an image in a prompt-injected answer would otherwise send
# whatever its URL carries to that address, with no click.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"

# Wrong passwords are throttled (django-axes, see agentsite/login_throttle.py): after
# AGENT_LOGIN_FAILURE_LIMIT failures for one username, or AGENT_LOGIN_ADDRESS_FAILURE_LIMIT
# from one address, every password for it, the right one too, is refused with a 429 page
# until AGENT_LOGIN_COOLOFF seconds have passed since the last failure. A sign-in clears
# that account's failures from that address. The sign-in page and the admin's go through
# the same check; staff see and clear lockouts in the admin ("Access attempts"). A limit of
# 0 turns the throttle off.
# AGENT_PROXY_COUNT: behind one proxy on this machine every connection comes from
# 127.0.0.1, and one address's limit would lock every visitor out at once; and only with
# proxies: a client reaching the site directly could write any address into the header.
_LOGIN_LIMIT = _AGENT["AGENT_LOGIN_FAILURE_LIMIT"]
_COOLOFF = _AGENT["AGENT_LOGIN_COOLOFF"]
if _LOGIN_LIMIT and min(_AGENT["AGENT_LOGIN_ADDRESS_FAILURE_LIMIT"], _COOLOFF) < 1:
    raise ImproperlyConfigured(
        "AGENT_LOGIN_ADDRESS_FAILURE_LIMIT and AGENT_LOGIN_COOLOFF must be at least 1 "
        "(AGENT_LOGIN_FAILURE_LIMIT=0 turns the sign-in throttle off)"
    )
AUTHENTICATION_BACKENDS = [
    # axes' AxesStandaloneBackend, first: it refuses a locked-out sign-in before any
    # password is checked.
    "agentsite.login_throttle.LoginThrottleBackend",
    # With AGENT_PASSWORD_LOGIN=false, a password signs in a superuser alone (a break-glass
    # account): everyone else signs in through the identity provider.
    "agentsite.signin.passwords.PasswordGate",
    "django.contrib.auth.backends.ModelBackend",
    # The organisation's OpenID Connect provider (AGENT_OIDC_ISSUER): its endpoints come from
    # the issuer's discovery document (agentsite/signin/oidc.py), so a test or the admin may
    # set the issuer while the site runs.
    "agentsite.signin.oidc.ProviderBackend",
]
if _AGENT["AGENT_LDAP_SERVER_URI"]:
    # LDAP or Active Directory, with the `ldap` extra (agentsite/signin/directory.py): after
    # the throttle, which must refuse a locked-out account before the directory is asked.
    AUTHENTICATION_BACKENDS.insert(2, "agentsite.signin.directory.DirectoryBackend")
    from agentsite.signin.directory import ldap_settings

    globals().update(ldap_settings(_AGENT))

# mozilla-django-oidc: the authorization code flow with PKCE, the id token signed with the
# provider's key (RS256, from its JWKS), a person made on first sign-in.
OIDC_RP_CLIENT_ID = _AGENT["AGENT_OIDC_CLIENT_ID"]
OIDC_RP_CLIENT_SECRET = _AGENT["AGENT_OIDC_CLIENT_SECRET"]
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = _AGENT["AGENT_OIDC_SCOPES"]
OIDC_USE_PKCE = True
OIDC_CREATE_USER = True
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATE_CLASS = "agentsite.signin.oidc.ProviderRedirect"
OIDC_CALLBACK_CLASS = "agentsite.signin.oidc.ProviderCallback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?provider_failed=1"

# The audit log (django-auditlog): who changed what, when; the admin and GET /api/audit.
AUDITLOG_INCLUDE_ALL_MODELS = False
AXES_ENABLED = _LOGIN_LIMIT > 0
AXES_FAILURE_LIMIT = max(_LOGIN_LIMIT, 1)
# Either one locks: the username's failures from any address, or the address's failures
# for any username (each against its own limit: see LoginThrottle).
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_COOLOFF_TIME = timedelta(seconds=max(_COOLOFF, 1))
AXES_RESET_ON_SUCCESS = True
# Tries during a lockout are refused uncounted: the cool-off runs from the last failure
# that was checked, so "try again in 15 minutes" holds for somebody who tried once more.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_HANDLER = "agentsite.login_throttle.LoginThrottle"
AXES_CLIENT_IP_CALLABLE = "agentsite.login_throttle.client_address"
AXES_LOCKOUT_CALLABLE = "agentsite.login_throttle.lockout_response"

# The first login `make run` creates when no superuser exists yet.
DJANGO_SUPERUSER_USERNAME = env.str("DJANGO_SUPERUSER_USERNAME", default="")
DJANGO_SUPERUSER_PASSWORD = env.str("DJANGO_SUPERUSER_PASSWORD", default="")

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Redis's publish/subscribe: a message reaches every process listening on its
            # group at once. The list-based layer keeps one inbox per process in Redis and
            # reads it a message per round trip, so a second tab on another process lagged
            # seconds behind with a couple of hundred chats running; an inbox also drops
            # what exceeds its capacity without a word. Nothing here needs messages to wait
            # in Redis for a process that is not listening: a socket that reconnects reads
            # the stored history.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # redis-py 8 times out socket reads after 5 s by default, which breaks the
            # layer's blocking receive on an idle socket; the server side has its own timeout.
            # It also refuses a 101st connection at once, and a web process with a couple of
            # hundred sockets joining their groups together needs more than that.
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": None,
                        "max_connections": env.int("REDIS_MAX_CONNECTIONS", default=1000),
                    }
                ]
            },
        }
    }
    # Shared by every process, so that the per-user turn limit holds across them.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "agentsite",
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "agent.turn.local_layer.LocalChannelLayer"}}

# django-q2 runs queued turns, cron jobs and sub-agents in `manage.py qcluster`.
Q_CLUSTER = {
    "name": "agentsite",
    "workers": _AGENT["AGENT_WORKERS"],
    "timeout": _AGENT["AGENT_TASK_TIMEOUT"],
    "retry": _AGENT["AGENT_TASK_TIMEOUT"] + 60,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agent.doors.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSONParser, less the bodies that would fail further on (see the module).
    "DEFAULT_PARSER_CLASSES": ["agent.doors.api.parsers.SafeJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "agent.doors.api.error_responses.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "agentsite API",
    "DESCRIPTION": (
        "Run the agent, follow its tasks, and read your sessions. The schema itself: "
        "[JSON](/api/schema) or [YAML](/api/schema?format=yaml)."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its page describe the API to its users, not to anonymous visitors.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # The docs page's assets come from the sidecar package, not from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "PREPROCESSING_HOOKS": ["agent.doors.api.schema.drop_slashed_aliases"],
}

# The agent's own settings (and the provider keys it passes on) are declared once, with
# their types, defaults and docs, in `agent.conf.SETTINGS`, and read here into Django
# settings of the same names; `agent.conf.agent_settings()` is their typed view.
# The server's environment without its secrets, for commands `exec` runs: the sandbox keeps
# only the locale and time zone of it; unfenced commands (AGENT_RESTRICT_TO_WORKSPACE off)
# get all of it.
_SECRET_NAME = re.compile(
    r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|DATABASE_URL|REDIS_URL|SETTINGS_MODULE"
    # A collector's credentials travel in its export headers.
    r"|OTLP\w*HEADERS",
    re.IGNORECASE,
)
AGENT_EXEC_ENV = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
# Django's DATA_UPLOAD_MAX_MEMORY_SIZE leaves a multipart body's files out of its count, so
# it keeps its 2.5 MB for everything but uploads (AGENT_MAX_UPLOAD_BYTES); files past
# FILE_UPLOAD_MAX_MEMORY_SIZE wait in a temporary file, not in memory, until stored.

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "agentsite.log_format.VisibleFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        "agent": {"level": LOG_LEVEL},
        "sessions_app": {"level": LOG_LEVEL},
        "cron_app": {"level": LOG_LEVEL},
        "mcp_app": {"level": LOG_LEVEL},
        # litellm logs every retry and fallback at INFO; its own failures reach us as errors.
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
