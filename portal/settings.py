"""Gangway's settings: twelve-factor, from environment variables.

Defaults give the self-contained demo (SQLite, an embedded broker on the file
system, the simulated cluster). Production sets DATABASE_URL, CELERY_BROKER_URL,
CLUSTER_BACKEND=kubernetes, SECRET_KEY and ALLOWED_HOSTS.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal import env
from portal.logging import logging_config
from tenants.group_map import parse_group_map

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env.text("GANGWAY_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env.flag("DJANGO_DEBUG", False)
SECRET_KEY = env.text("SECRET_KEY", "insecure-demo-key" if DEBUG else "")
# `manage.py` commands that sign nothing, keep no session and serve nothing start without a secret, so
# `plan` and `replay` run on a fresh checkout; the key stays empty, and whatever would sign with it
# raises. Every other process (web, worker, beat, the other commands) refuses to start without one.
COMMANDS_WITHOUT_SECRETS = ("plan", "replay", "manifest", "settings_reference")
_command = sys.argv[1] if len(sys.argv) > 1 and Path(sys.argv[0]).name == "manage.py" else ""
_unfit_key = not SECRET_KEY or (not DEBUG and SECRET_KEY.startswith("insecure-"))
if _unfit_key and _command in COMMANDS_WITHOUT_SECRETS:
    SECRET_KEY = ""
elif _unfit_key:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a long random value (or DJANGO_DEBUG=1 for a local demo)."
    )
ALLOWED_HOSTS = env.items("ALLOWED_HOSTS", "127.0.0.1,localhost" if DEBUG else "")
# A Host header names an IPv6 address in brackets ("[fd00::5]:8000": Prometheus scraping a pod by its address
# on an IPv6 cluster), Django compares it so: an IPv6 address listed bare is accepted in brackets too.
ALLOWED_HOSTS += [f"[{host}]" for host in ALLOWED_HOSTS if ":" in host and not host.startswith("[")]
CSRF_TRUSTED_ORIGINS = env.items("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_htmx",
    "template_partials",
    "tenants",
    "jobs",
    "scheduling",
    "notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.refuse_unstorable_urls",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.signed_out_parts",
    "portal.middleware.form_posts_only",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "tenants.identity.sso_context",
                "portal.context.loop_health",
                "portal.context.submitting",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env.text("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gangway.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo runs web, worker and beat on one SQLite file: WAL lets readers
    # proceed during a write, IMMEDIATE makes every transaction take the write
    # lock up front so two processes never deadlock upgrading a read lock.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif env.flag("DATABASE_PREPARED_STATEMENTS", True):
    # PostgreSQL plans a statement once per connection instead of on every run: psycopg prepares
    # what a connection has run 5 times, which needs the parameters bound on the server. An API
    # submission runs the same 9 statements every time; this takes 40% off PostgreSQL's CPU for it.
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 5}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.text("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.text("STATIC_ROOT", str(VAR_DIR / "static")))

# --- Notifications: e-mail through Django's mail settings, Slack-compatible webhooks ---
EMAIL_BACKEND = env.text(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env.text("EMAIL_HOST", "localhost")
EMAIL_PORT = env.integer("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env.text("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env.text("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env.flag("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env.text("DEFAULT_FROM_EMAIL", "gangway@localhost")
PUBLIC_URL = env.text("PUBLIC_URL", "").rstrip("/")
# A delivery made this soon after another to the same receiver waits this long, so a burst goes out as one digest.
NOTIFY_BATCH_SECONDS = env.integer("NOTIFY_BATCH_SECONDS", 10, minimum=0)
JOB_TOKEN_MAX_AGE = env.integer("JOB_TOKEN_MAX_AGE", 2592000, minimum=60)  # 30 days
# How long the record of a notification sent or failed (Delivery) is kept; then beat's prune_deliveries deletes
# it, the job's events staying. 0: kept for good. Not under a day: a notify run again within a day (resend_lost)
# finds by its record that a message went out, and tells nobody twice.
DELIVERY_RETENTION = env.integer("DELIVERY_RETENTION", 2592000, minimum=0)  # 30 days
if 0 < DELIVERY_RETENTION < 86400:
    raise ImproperlyConfigured(f"DELIVERY_RETENTION must be 0 (keep every delivery) or at least 86400 (a day), "
                               f"got {DELIVERY_RETENTION}.")  # fmt: skip
# Webhooks go to https URLs only, unless this is on (the demo, and tests with a local receiver).
WEBHOOK_ALLOW_HTTP = env.flag("WEBHOOK_ALLOW_HTTP", DEBUG)
WEBHOOK_ALLOW_PRIVATE = env.flag("WEBHOOK_ALLOW_PRIVATE", DEBUG)  # notifications/outbound.py
# Seconds one webhook post, and one e-mail's whole SMTP session, may take in all (notifications/deadlines.py). Each
# must be above 0 and at most half of CELERY_TASK_SOFT_TIME_LIMIT: the system checks refuse any other value at
# every process's start (notifications.E001, E002), naming the variable.
WEBHOOK_DEADLINE = env.number("WEBHOOK_DEADLINE", 5)
EMAIL_DEADLINE = env.number("EMAIL_DEADLINE", 30)

# --- Celery -----------------------------------------------------------------
# The default broker is kombu's file-system transport: no server to run, shared
# by every process on this machine through VAR_DIR/broker.
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.text("CELERY_BROKER_URL", "filesystem://localhost/")
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"  # kombu's, with atomic writes
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "control_folder": str(_BROKER_DIR / "control"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = env.text("CELERY_RESULT_BACKEND", f"file://{_BROKER_DIR / 'results'}")
else:
    CELERY_RESULT_BACKEND = env.text("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        # kombu waits forever by default on a Redis that does not answer (a lost route, a dead node): a web
        # request asking for a cycle would hang with it, and so would /readyz. Connecting gives up after
        # 3 s, a command after 10 s (well above the worker's 1 s BRPOP), and the caller logs it.
        CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10}
CELERY_TASK_ALWAYS_EAGER = env.flag("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_TIME_LIMIT = 120
CELERY_TASK_SOFT_TIME_LIMIT = 100
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two queues, each with its own worker (deploy/entrypoint.sh): the loop's tasks (admission cycle,
# reconcile, tenant sync) stay on Celery's default queue, and notifications go to theirs, so a
# webhook or SMTP server that never answers holds a notification worker, never an admission cycle.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = {"notifications.*": {"queue": "notifications"}}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Scheduling ---------------------------------------------------------------
CLUSTER_BACKEND = env.choice("CLUSTER_BACKEND", "simulated", ("simulated", "kubernetes"))
ADMISSION_INTERVAL = env.integer("ADMISSION_INTERVAL", 5, minimum=1)
RECONCILE_INTERVAL = env.integer("RECONCILE_INTERVAL", 5, minimum=1)
FIT_PREVIEW_REUSE = env.integer("FIT_PREVIEW_REUSE", 5, minimum=0)
ADMISSION_TIMEOUT = env.integer("ADMISSION_TIMEOUT", 600, minimum=1)
CYCLE_FAILURES_BEFORE_UNREADY = env.integer("CYCLE_FAILURES_BEFORE_UNREADY", 3, minimum=1)
STARVATION_AFTER = env.integer("STARVATION_AFTER", 1800)
MAX_RESERVATIONS = env.integer("MAX_RESERVATIONS", 1)
RESERVATION_SLACK = env.integer("RESERVATION_SLACK", 600)
MIN_RUNTIME_BEFORE_PREEMPTION = env.integer("MIN_RUNTIME_BEFORE_PREEMPTION", 600)
DEFAULT_RUNTIME = env.integer("DEFAULT_RUNTIME", 86400, minimum=1)
# How long the cluster keeps the object of a job Gangway created once it ended (with its pods, whose
# logs the job page shows) before reconcile deletes it; 0: kept until someone deletes it. Every cycle
# and every reconcile lists every object the cluster keeps (scheduling.reconcile._delete_expired).
ENDED_JOB_RETENTION = env.integer("ENDED_JOB_RETENTION", 604800, minimum=0)  # 7 days
# How long the admission cycles' rows and the teams' GPU usage samples are kept; each cycle deletes older ones
# (scheduling.records). At least a day: the team page's chart shows the last 24 h of samples.
CYCLE_RETENTION = env.integer("CYCLE_RETENTION", 604800, minimum=86400)  # 7 days
# Queued jobs a team may have before a submission is refused (jobs.services.job_submit); 0: no cap.
# Every queued job is planned in every admission cycle, so one team's backlog slows every team's.
MAX_QUEUED_PER_TEAM = env.integer("MAX_QUEUED_PER_TEAM", 1000)
SIM_DEFAULT_DURATION = env.integer("SIM_DEFAULT_DURATION", 180, minimum=1)
SIM_FAILURE_RATE = env.number("SIM_FAILURE_RATE", 0)
if not 0 <= SIM_FAILURE_RATE <= 1:
    raise ImproperlyConfigured(f"SIM_FAILURE_RATE must be between 0 and 1, got {SIM_FAILURE_RATE}.")
SIM_SEED = env.integer("SIM_SEED", 7)
# The demo's traffic (scheduling.demo_traffic): seconds between two looks at the queue, each submitting a
# job while few wait; 0: none. The simulated cluster only: `make demo` sets it.
DEMO_TRAFFIC = env.integer("DEMO_TRAFFIC", 0, minimum=0)
if DEMO_TRAFFIC and CLUSTER_BACKEND != "simulated":
    raise ImproperlyConfigured("DEMO_TRAFFIC submits made-up jobs: it runs on the simulated cluster only "
                               f"(CLUSTER_BACKEND is {CLUSTER_BACKEND}); unset it.")  # fmt: skip
CELERY_BEAT_SCHEDULE = {
    "admission-cycle": {"task": "gangway.admission_cycle", "schedule": float(ADMISSION_INTERVAL)},
    "reconcile": {"task": "gangway.reconcile", "schedule": float(RECONCILE_INTERVAL)},
    "sync-tenants": {"task": "gangway.sync_tenants", "schedule": 300.0},
    # Notifications no task will run: a worker died, or the broker refused the task (notifications.tasks.resend_lost).
    "resend-lost-notifications": {"task": "notifications.resend_lost", "schedule": 300.0},
    # Deliveries sent or failed longer than DELIVERY_RETENTION ago, and token notices as old of tokens that no longer
    # authenticate (notifications.tasks.prune_deliveries).
    "prune-deliveries": {"task": "notifications.prune_deliveries", "schedule": 3600.0},
    # API tokens entering their last 14 days, or their last day: their people are told once each
    # (notifications.tasks.warn_expiring_tokens).
    "warn-expiring-tokens": {"task": "notifications.warn_expiring_tokens", "schedule": 3600.0},
}
if DEMO_TRAFFIC:
    CELERY_BEAT_SCHEDULE["demo-traffic"] = {"task": "gangway.demo_traffic", "schedule": float(DEMO_TRAFFIC)}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["portal.renderers.JsonRenderer", "rest_framework.renderers.BrowsableAPIRenderer"],
}

# --- REST API (/api/v1/): tokens, throttling, the OpenAPI schema ---------------
# Token authentication comes first so a request without credentials gets 401
# with a WWW-Authenticate challenge; the session serves the browser's own calls.
INSTALLED_APPS += ["drf_spectacular", "drf_spectacular_sidecar"]
# One budget per person (all their user tokens and their session) or per team (all its team tokens).
API_RATE = env.text("API_RATE", "600/min")
# Active user tokens one person may hold (the budget is theirs however many they make; this keeps them few).
USER_TOKEN_LIMIT = env.integer("USER_TOKEN_LIMIT", 20, minimum=1)
# The longest an API token may live, in days; 0 lets a token never expire.
TOKEN_MAX_LIFETIME = env.integer("TOKEN_MAX_LIFETIME", 0)
# Posts of the pages that submit or preview (the submit form, fit preview, YAML import, quota editor), per user.
PAGE_RATE = env.text("PAGE_RATE", "120/min")
for _name, _rate in (("API_RATE", API_RATE), ("PAGE_RATE", PAGE_RATE)):
    _count, _, _period = _rate.partition("/")
    if not (_count.isdigit() and int(_count) > 0 and _period in ("s", "sec", "m", "min", "h", "hour", "d", "day")):
        raise ImproperlyConfigured(f"{_name} must look like 600/min (per s, min, hour or day), got {_rate!r}.")
REST_FRAMEWORK.update(
    {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "tenants.auth.TokenAuthentication",
            "rest_framework.authentication.SessionAuthentication",
        ],
        # The API reads JSON (and YAML where a job is submitted); JSON nested deeper than a job needs is
        # refused before parsing (a RecursionError otherwise). Form posts are the pages' business, not the API's.
        "DEFAULT_PARSER_CLASSES": ["jobs.parsers.JsonParser"],
        "DEFAULT_THROTTLE_CLASSES": ["tenants.auth.TokenRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"token": API_RATE},
        "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    }
)
# Throttle counts must be shared by every web process: Redis when there is one
# (REDIS_URL, else a Redis broker, redis:// or over TLS rediss://), process memory for the demo.
_REDIS_URL = env.text("REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "")
# While that Redis is down, requests go unthrottled rather than fail (portal.cache.BestEffortRedisCache).
API_THROTTLE_CACHE = "throttle"
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {"BACKEND": "portal.cache.BestEffortRedisCache", "LOCATION": _REDIS_URL, "KEY_PREFIX": "gangway"}
        if _REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
    ),
}
# A job's logs read once for all its viewers for a few seconds (scheduling.logs): in Redis, shared by every web worker.
CACHES["logs"] = (CACHES["throttle"] if _REDIS_URL
                  else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "logs"})  # fmt: skip
SPECTACULAR_SETTINGS = {
    "TITLE": "Gangway API",
    "DESCRIPTION": (
        "Submit training jobs to a shared GPU cluster, follow them, cancel them; read teams, quotas, "
        "the queue and the cluster. Authenticate with `Authorization: Bearer gw_...` (a team or user token)."
    ),
    "VERSION": "v1",  # as in /api/v1/; Redoc writes it after the title in brackets, where a bare "(1)" reads as a count
    "OAS_VERSION": "3.1.0",  # JSON Schema in full: propertyNames states the env names the spec accepts
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"JobKindEnum": "jobs.kinds.choices", "JobEventKindEnum": "jobs.models.JobEvent.Kind"},
    # Every operation documents the 4xx answers all views share (portal/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums", "portal.schema.document_error_answers",
        "portal.schema.close_job_spec_objects",
    ],
}

# --- Running it: logs, metrics, static files (see portal/settings_reference.py) ---
LOG_FORMAT = env.choice("LOG_FORMAT", "plain", ("plain", "json"))
LOGGING = logging_config(
    fmt=LOG_FORMAT, level=env.choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
)
# JSON logs from the worker and beat too: Celery keeps Django's handlers instead of installing its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
# The worker imports the task_failure counter at start-up; /metrics reads it from the shared cache.
CELERY_IMPORTS = ["portal.metrics"]
METRICS_TOKEN = env.text("METRICS_TOKEN", "")
# /metrics shows every team's queue, quotas and usage: without a token it answers 403 (portal.metrics), unless it is
# opened to whoever reaches the web on purpose. Open in debug, so the demo's needs no token.
METRICS_PUBLIC = env.flag("METRICS_PUBLIC", DEBUG)
CACHES["metrics"] = (
    {"BACKEND": "portal.cache.RedisCache", "LOCATION": _REDIS_URL, "KEY_PREFIX": "gangway"}
    if _REDIS_URL
    else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "metrics")}
)
# The image collects static files at build; the web process serves them itself (no separate file server).
if STATIC_ROOT.is_dir():
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")  # fmt: skip

# --- Identity and hardening ---------------------------------------------------------
# Single sign-on (OpenID Connect) is on when OIDC_RP_CLIENT_ID is set; local accounts keep working.
OIDC_RP_CLIENT_ID = env.text("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env.text("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.text("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env.text("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env.text("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env.text("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env.choice("OIDC_RP_SIGN_ALGO", "RS256", ("RS256", "ES256", "HS256"))
OIDC_RP_SCOPES = env.text("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env.text("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_MAP = env.text("OIDC_GROUP_MAP", "")
if OIDC_RP_CLIENT_ID:
    _missing = [name for name in ("OIDC_RP_CLIENT_SECRET", "OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT",
                                  "OIDC_OP_USER_ENDPOINT", "OIDC_OP_JWKS_ENDPOINT") if not globals()[name]]  # fmt: skip
    if _missing:
        raise ImproperlyConfigured(f"Single sign-on needs {', '.join(_missing)} when OIDC_RP_CLIENT_ID is set.")
    parse_group_map(OIDC_GROUP_MAP)  # fail at start-up on a malformed map, naming the entry

# Login throttling: after AXES_FAILURE_LIMIT failed logins for one username from one address,
# that pair is locked out for AXES_COOLOFF_MINUTES; staff see and clear lockouts in the admin.
INSTALLED_APPS += ["axes"]
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    *(["tenants.identity.GangwayOIDCBackend"] if OIDC_RP_CLIENT_ID else []),
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.integer("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env.integer("AXES_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
AXES_RESET_ON_SUCCESS = True
# Behind PROXY_COUNT reverse proxies (an Ingress: 1) the client is read from X-Forwarded-For
# (portal.addresses), else every client would be the proxy's address and five wrong passwords
# from anywhere would lock a person out for everyone; axes reads it through this callable alone.
PROXY_COUNT = env.integer("PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "portal.addresses.client_address"

# Browser security. Pages carry no inline scripts, so scripts come only from this origin.
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1, "csp.middleware.CSPMiddleware")
INSTALLED_APPS += ["csp"]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],  # bar widths are style attributes; no style elements are allowed
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.flag("SECURE_COOKIES", not DEBUG)  # sent over HTTPS only
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env.flag("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]  # probes and scrapers speak plain HTTP in-cluster
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env.flag("SECURE_HSTS_PRELOAD", not DEBUG)  # consent only; submitting the domain stays a choice
if env.flag("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
DATA_UPLOAD_MAX_MEMORY_SIZE = 512 * 1024  # request bodies: a job spec or manifest is a few KiB
REST_FRAMEWORK["EXCEPTION_HANDLER"] = "portal.api_errors.exception_handler"  # 413 as JSON for an oversized body

# Under DEBUG Django answers an unknown address, a bad request or an error with its debug pages (the URLs tried,
# a traceback). Off, debug keeps its other conveniences and the pages are the portal's own 400, 404 and 500, the
# traceback in the log: the demo's choice (deploy/demo.sh). Last of the middleware
# (portal.middleware.ProductErrorPages), and first the check of the Host header, which Django's middleware would
# refuse with its debug page. Static files are served by WhiteNoise, which reads them from the apps' folders under
# DEBUG, as without debug, not by runserver (`--nostatic`), whose handler answers a missing one with Django's
# debug 404; a file WhiteNoise does not have goes on to the portal's 404.
DEBUG_ERROR_PAGES = env.flag("DEBUG_ERROR_PAGES", True)
if DEBUG and not DEBUG_ERROR_PAGES:
    MIDDLEWARE.insert(0, "portal.middleware.product_bad_host_page")
    if "whitenoise.middleware.WhiteNoiseMiddleware" not in MIDDLEWARE:
        MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                          "whitenoise.middleware.WhiteNoiseMiddleware")  # fmt: skip
    MIDDLEWARE.append("portal.middleware.ProductErrorPages")
