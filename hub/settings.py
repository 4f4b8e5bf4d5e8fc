"""Hub settings: everything comes from the environment (see .env.example).

No environment at all gives the embedded mode: SQLite, the in-memory channel layer and a Celery
worker inside the same process on an in-memory broker. REDIS_URL switches the channel layer, the
broker and the cache to Redis; DATABASE_URL switches the database to PostgreSQL.
"""

from pathlib import Path

from hub import redis_config
from hub.environment import (
    ConfigurationError,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    storage_from_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("HUB_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    # Embedded mode keeps a generated key beside its database so sessions survive a restart.
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        import secrets

        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in env_str("CSRF_TRUSTED_ORIGINS").split(",") if o.strip()
]

INSTALLED_APPS = [
    "hub.devserver",  # runserver as Daphne's, without importing Twisted everywhere
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "hub",
    "chats",
    "agents_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "hub.headers.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "hub.middleware.RefuseBadInputMiddleware",  # U+0000, lone surrogates, NaN: 400 (hub/input.py)
    "hub.middleware.ServiceUnavailableMiddleware",  # database or Redis down: 503 (hub/unavailable.py)
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "hub.middleware.StaffOnlyAdminMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "chats.temporary.middleware.TemporaryChatMiddleware",  # a temporary chat's views on its image
]

ROOT_URLCONF = "hub.urls"
ASGI_APPLICATION = "hub.asgi.application"
WSGI_APPLICATION = None

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
                "hub.context_processors.hub_settings",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL)}
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("HUB_SQLITE_NAME") or DATA_DIR / "hub.sqlite3",
            # WAL lets the in-process worker write while pages read; the timeout rides out the
            # short write locks SQLite takes instead of failing with "database is locked".
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            "TEST": {"NAME": DATA_DIR / "test-hub.sqlite3"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
EMBEDDED = not DATABASE_URL and not env_str("REDIS_URL")

# --- Redis: channel layer, broker, cache ----------------------------------------------------
# hub.redis_config turns REDIS_URL and the HUB_REDIS_* settings (password, TLS, Sentinel) into
# every client's configuration; REDIS_URL stays here as the switch between Redis and memory.
HUB_REDIS = redis_config.from_environment()
# The debug page and error reports hide the URLs that may carry a password (see hub.redaction).
DEFAULT_EXCEPTION_REPORTER_FILTER = "hub.redaction.SettingsFilter"
REDIS_URL = HUB_REDIS.url if HUB_REDIS else ""
if HUB_REDIS:
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialWithJitterBackoff

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # No socket timeout, on purpose. With one, redis-py sends every command through
            # asyncio.wait_for, which on Python 3.11 swallows a cancel that lands just as the send
            # finishes: a consumer closed at that moment kept waiting on Redis forever. (redis-py's
            # default 5 s read timeout also equalled channels-redis' 5 s blocking wait, which
            # crashed idle consumers.) A PING before a command on a connection idle for 30 s and
            # TCP keepalive find a dead connection instead.
            "CONFIG": {
                "hosts": [HUB_REDIS.channel_layer_host(**{
                    "socket_timeout": None,
                    "socket_connect_timeout": 5,
                    "socket_keepalive": True,
                    "health_check_interval": 30,
                    # redis-py 8 caps a pool at 100 connections and fails a command past that:
                    # a hundred tabs closing at once (each leaving two groups) hit the cap, and
                    # the tabs over it stayed in their groups. Redis itself allows 10,000 clients.
                    "max_connections": 2000,
                    # After a Redis restart every pooled connection is dead, and with no retry the
                    # first command on each failed (a tab's group_add, a worker's first broadcast).
                    # A lost connection is retried on a fresh one, backing off for ~3 s in all.
                    "retry": AsyncRetry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 8),
                })],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          # The pool comes from HUB_REDIS (see CachePool); the location only names it.
                          "LOCATION": HUB_REDIS.redacted_url,
                          "OPTIONS": {"pool_class": "hub.redis_config.CachePool"}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "chats.events.EmbeddedChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Celery ---------------------------------------------------------------------------------
HUB_LEASE_SECONDS = env_int("HUB_LEASE_SECONDS", 30)
CELERY_BROKER_URL = HUB_REDIS.broker_url() if HUB_REDIS else "memory://localhost/"
CELERY_BROKER_USE_SSL = HUB_REDIS.broker_use_ssl() if HUB_REDIS else None
CELERY_TASK_IGNORE_RESULT = True
# No result backend (results are ignored): Celery's stand-in for none stores nothing, so one
# instance can serve every thread. Otherwise each of a worker's task threads built its own on its
# first task, reading the entry points of every installed package: about 3 ms of CPU each, paid
# by the first turns after a worker starts (50 threads per worker process).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Task modules a worker imports besides each app's tasks.py (hub.celery discovers those): the
# turn's tasks live in the agents_app.turns package, on top of its layers.
CELERY_IMPORTS = ["agents_app.turns.tasks"]
# Celery's Django support closes every database connection before and after each task unless
# this is set, so every turn paid for a new PostgreSQL connection (a server process forked, its
# caches filled). With it, Celery closes them only every 2 x this many tasks; hub.celery closes
# the broken ones and those older than CONN_MAX_AGE around each task, as Django does per request.
CELERY_DB_REUSE_MAX = 100
# A task that is not acknowledged within this time is delivered again. It must be longer than a
# lease so redelivery never races a live worker; the lease, not the broker, decides who runs.
# HUB_VISIBILITY_TIMEOUT overrides it only to prove that (the chaos tests set it below a turn).
HUB_VISIBILITY_TIMEOUT = env_int("HUB_VISIBILITY_TIMEOUT", max(3600, HUB_LEASE_SECONDS * 4))
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": HUB_VISIBILITY_TIMEOUT}
if HUB_REDIS:
    CELERY_BROKER_TRANSPORT_OPTIONS |= HUB_REDIS.broker_transport_options()
if HUB_VISIBILITY_TIMEOUT < 100:
    # kombu looks for overdue messages only every interval x throttle (10 x 10 s by default).
    CELERY_BROKER_TRANSPORT_OPTIONS |= {"unacked_restore_interval": 1, "unacked_restore_throttle": 1}
if not REDIS_URL:
    # kombu's in-memory broker cannot wake a waiting worker: the worker looks for a message every
    # polling interval, 1 s by default, so each turn waited 0.2 to 1 s before it started. Looking
    # 50 times a second costs an idle hub about 1% of a core more.
    CELERY_BROKER_TRANSPORT_OPTIONS |= {"polling_interval": 0.02}
CELERY_TASK_ALWAYS_EAGER = False
HUB_SWEEP_SECONDS = env_float("HUB_SWEEP_SECONDS", 5.0)
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "agents_app.sweep_runs", "schedule": HUB_SWEEP_SECONDS},
    "purge-trash": {"task": "chats.purge_trash", "schedule": 3600.0},
    "purge-expired-exports": {"task": "chats.purge_expired_exports", "schedule": 3600.0},
    "archive-idle-chats": {"task": "chats.archive_idle_chats", "schedule": 3600.0},
    "expire-temporary-chats": {"task": "chats.expire_temporary_chats", "schedule": 60.0},
}
HUB_STALL_SECONDS = env_float("HUB_STALL_SECONDS", 60.0)
HUB_MAX_RECOVERIES = env_int("HUB_MAX_RECOVERIES", 3)
# Every worker refreshes its row (agents_app.workers) this often; the health page calls a worker
# silent after three missed beats.
HUB_WORKER_HEARTBEAT_SECONDS = env_float("HUB_WORKER_HEARTBEAT_SECONDS", 10.0)
# A run queued longer than this is reported (health page, hub_repair) as waiting for a worker.
HUB_QUEUED_WARNING_SECONDS = env_float("HUB_QUEUED_WARNING_SECONDS", 60.0)
# Workers also mark themselves alive in Redis four times a second (agents_app.turns.peers): one silent
# for this long is taken for gone and its turns recover at once (a dead one on the same host is
# seen at once, by its pid). Longer than any pause a live worker should have.
HUB_PEER_SILENT_SECONDS = env_float("HUB_PEER_SILENT_SECONDS", 3.0)
# The CPU priority (Linux nice, 0 to 19) of a worker's threads that start and end turns, below the
# threads that stream (hub.startup.yield_to_streams); 0 leaves them as they are.
# Embedded, the pages, sockets and worker are threads of one process: there a lowered thread that
# holds the interpreter's lock is put off by the kernel while the others wait for that lock, and
# fifty conversations at once got their first words two to three times later (docs/performance.md).
HUB_BACKGROUND_NICE = env_int("HUB_BACKGROUND_NICE", 0 if EMBEDDED else 19)
if not 0 <= HUB_BACKGROUND_NICE <= 19:
    raise ConfigurationError(f"HUB_BACKGROUND_NICE={HUB_BACKGROUND_NICE} is not between 0 and 19.")
# Threads of a web process that store what its sockets send (chats.consumers.FRAME_THREADS): a
# burst of sends is stored this many at a time, each chat's in order.
HUB_FRAME_THREADS = env_int("HUB_FRAME_THREADS", 4)
if HUB_FRAME_THREADS < 1:
    raise ConfigurationError(f"HUB_FRAME_THREADS={HUB_FRAME_THREADS} must be at least 1.")
# How many turns a worker process starts or settles at once (agents_app.turns.execution.TURN_BOOKKEEPING);
# the rest wait their turn, so the process's model loop keeps the GIL for its live deltas.
HUB_TURN_STARTS_AT_ONCE = env_int("HUB_TURN_STARTS_AT_ONCE", 2)
if HUB_TURN_STARTS_AT_ONCE < 1:
    raise ConfigurationError(f"HUB_TURN_STARTS_AT_ONCE={HUB_TURN_STARTS_AT_ONCE} must be at least 1.")
# Checkpoints a process's streaming turns write a second in all (agents_app.turns.execution
# .checkpoint_interval): a turn checkpoints every 250 ms while few stream, less often when many do.
HUB_CHECKPOINTS_PER_SECOND = env_float("HUB_CHECKPOINTS_PER_SECOND", 50.0)
if HUB_CHECKPOINTS_PER_SECOND <= 0:
    raise ConfigurationError(f"HUB_CHECKPOINTS_PER_SECOND={HUB_CHECKPOINTS_PER_SECOND} must be above 0.")
# Test-only tools (agents_app.tools.TEST_TOOLS, e.g. `die`); never set this in production.
HUB_TEST_TOOLS = env_bool("HUB_TEST_TOOLS", False)
HUB_MAX_AGENT_HOPS = env_int("HUB_MAX_AGENT_HOPS", 3)
# Tokens (in and out, as providers report them) a user may use in a calendar month (UTC); once
# reached, new turns are not started until the month ends. Empty or 0: no limit (agents_app.usage).
HUB_MONTHLY_TOKENS = env_int("HUB_MONTHLY_TOKENS", 0)
if HUB_MONTHLY_TOKENS < 0:
    raise ConfigurationError(f"HUB_MONTHLY_TOKENS={HUB_MONTHLY_TOKENS} must be 0 (no limit) or more.")

# --- Auth -----------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chats:list"
LOGOUT_REDIRECT_URL = "login"

# --- Security (docs/operations.md, "Security") -----------------------------------------------
# Outbound calls to addresses users type (an agent's base URL, a remote): hosts or CIDRs the
# operator allows besides public addresses (agents_app.outbound). The environment's own provider
# base URLs (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, OLLAMA_BASE_URL) are always allowed.
HUB_OUTBOUND_ALLOW = env_list("HUB_OUTBOUND_ALLOW")

# Log-in, token and sign-up throttling, sign-up and invitations.
HUB_ALLOW_SIGNUP = env_bool("HUB_ALLOW_SIGNUP", False)
# Whether every user (not only staff) may make invitation links on /settings/invitations/.
HUB_ALLOW_INVITES = env_bool("HUB_ALLOW_INVITES", False)
# Days an invitation link stays usable.
HUB_INVITATION_DAYS = env_int("HUB_INVITATION_DAYS", 7)
# The throttle (hub.throttle) counts attempts for this many seconds; reaching a limit within it
# locks the key for one window, doubling with each further lock up to HUB_THROTTLE_MAX_LOCK_SECONDS.
HUB_THROTTLE_WINDOW_SECONDS = env_int("HUB_THROTTLE_WINDOW_SECONDS", 60)
HUB_THROTTLE_MAX_LOCK_SECONDS = env_int("HUB_THROTTLE_MAX_LOCK_SECONDS", 3600)
# Failed log-ins per window, counted per username and per client address alike.
HUB_LOGIN_FAILURE_LIMIT = env_int("HUB_LOGIN_FAILURE_LIMIT", 5)
# Failed API token attempts per window per client address. Higher than for passwords: programs
# behind one address share it, and a token (32 random bytes) cannot be guessed anyway.
HUB_TOKEN_FAILURE_LIMIT = env_int("HUB_TOKEN_FAILURE_LIMIT", 20)
# Submitted sign-up forms per window per client address.
HUB_SIGNUP_LIMIT = env_int("HUB_SIGNUP_LIMIT", 5)
for _name in ("HUB_INVITATION_DAYS", "HUB_THROTTLE_WINDOW_SECONDS", "HUB_THROTTLE_MAX_LOCK_SECONDS",
              "HUB_LOGIN_FAILURE_LIMIT", "HUB_TOKEN_FAILURE_LIMIT", "HUB_SIGNUP_LIMIT"):
    if globals()[_name] < 1:
        raise ConfigurationError(f"{_name}={globals()[_name]} must be at least 1.")

# Origins, headers and TLS.
# HUB_HTTPS: the hub is reached only over HTTPS (its own TLS, or a proxy's). It marks the session
# and CSRF cookies Secure (never sent over plain HTTP), sends HSTS and redirects plain HTTP.
HUB_HTTPS = env_bool("HUB_HTTPS", False)
# HUB_BEHIND_PROXY: a reverse proxy in front sets X-Forwarded-Proto; trust it for request.is_secure()
# and for the websocket origin check (hub.origins). Only with a proxy that always sets the header.
HUB_BEHIND_PROXY = env_bool("HUB_BEHIND_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HUB_BEHIND_PROXY else None
SESSION_COOKIE_SECURE = HUB_HTTPS
CSRF_COOKIE_SECURE = HUB_HTTPS
# A year once HTTPS is on: browsers then refuse plain HTTP to this host; 0 sends no HSTS header.
HUB_HSTS_SECONDS = env_int("HUB_HSTS_SECONDS", 365 * 24 * 3600 if HUB_HTTPS else 0)
SECURE_HSTS_SECONDS = HUB_HSTS_SECONDS
# Redirect plain HTTP to HTTPS, behind a proxy too (it reads X-Forwarded-Proto there), so a page
# never loads where its Secure cookies are not sent. /healthz stays plain for load balancers that
# probe the web process directly.
SECURE_SSL_REDIRECT = HUB_HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
# Django's defaults, set here so they stay: no MIME sniffing, the full URL only to the hub itself,
# no framing (CSP frame-ancestors says the same to newer browsers; hub.headers).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# --- Hub behaviour --------------------------------------------------------------------------
MESSAGE_PAGE_SIZE = env_int("MESSAGE_PAGE_SIZE", 50)
HUB_MAX_MESSAGE_CHARS = env_int("HUB_MAX_MESSAGE_CHARS", 100_000)
HUB_MAX_TITLE_CHARS = 200
HUB_TRASH_DAYS = env_int("HUB_TRASH_DAYS", 30)
# Chats not updated for this many days are archived by the hourly beat task; empty or 0: never.
HUB_ARCHIVE_AFTER_DAYS = env_int("HUB_ARCHIVE_AFTER_DAYS", 0)
if HUB_ARCHIVE_AFTER_DAYS < 0:
    raise ConfigurationError("HUB_ARCHIVE_AFTER_DAYS must be 0 (never) or more.")
# A temporary chat (chats.temporary) is gone this long after its last change.
HUB_TEMPORARY_HOURS = env_float("HUB_TEMPORARY_HOURS", 24.0)
if HUB_TEMPORARY_HOURS <= 0:
    raise ConfigurationError("HUB_TEMPORARY_HOURS must be more than 0.")
# Files in chats: the most one file may be, and all of a user's files together.
HUB_MAX_UPLOAD_MB = env_float("HUB_MAX_UPLOAD_MB", 25.0)
HUB_USER_STORAGE_MB = env_float("HUB_USER_STORAGE_MB", 1024.0)
if HUB_MAX_UPLOAD_MB <= 0 or HUB_USER_STORAGE_MB <= 0:
    raise ConfigurationError("HUB_MAX_UPLOAD_MB and HUB_USER_STORAGE_MB must be more than 0.")
# How many files one worker process reads at once, each in a child process of up to 1 GB
# (chats.attachments.reader_process); more wait in the queue without holding a worker thread.
HUB_FILE_READS_AT_ONCE = env_int("HUB_FILE_READS_AT_ONCE", 2)
if HUB_FILE_READS_AT_ONCE < 1:
    raise ConfigurationError(f"HUB_FILE_READS_AT_ONCE={HUB_FILE_READS_AT_ONCE} must be at least 1.")
# The largest export file a user may import (ChatGPT's and Claude's exports run to hundreds of MB;
# they are read as streams, never whole).
HUB_MAX_IMPORT_MB = env_float("HUB_MAX_IMPORT_MB", 1024.0)
if HUB_MAX_IMPORT_MB <= 0:
    raise ConfigurationError("HUB_MAX_IMPORT_MB must be more than 0.")
# An export's file is kept this many days after it is made for its owner to download, then the
# hourly beat task deletes it (the job stays, marked expired): a .zip of every chat with its files
# is as large as all of them.
HUB_EXPORT_KEEP_DAYS = env_float("HUB_EXPORT_KEEP_DAYS", 7.0)
if HUB_EXPORT_KEEP_DAYS <= 0:
    raise ConfigurationError("HUB_EXPORT_KEEP_DAYS must be more than 0.")
# The largest image a model that sees images is sent; a larger one is named (agents_app.turns.files).
HUB_IMAGE_PART_MB = env_float("HUB_IMAGE_PART_MB", 5.0)
# An upload larger than this goes to a temporary file as it arrives, not into memory (Django's
# TemporaryFileUploadHandler), and from there to storage in chunks.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "chats.attachments.uploads.SizeLimitedUploadHandler",  # stops a file over HUB_MAX_UPLOAD_MB
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DIRECTORY_PAGE_MAX = 100
if MESSAGE_PAGE_SIZE < 1:
    raise ConfigurationError("MESSAGE_PAGE_SIZE must be at least 1.")

# --- REST API (/api/v1/, hub/api/) -----------------------------------------------------------
import re as _re  # noqa: E402

# Programs authenticate with a per-user API token (Authorization: Bearer …); the browser with its
# session (and CSRF). The token scheme comes first so a request without credentials gets 401.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "hub.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["hub.api.parsers.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "hub.api.schema.HubAutoSchema",
    "EXCEPTION_HANDLER": "hub.api.errors.exception_handler",
    "URL_FORMAT_OVERRIDE": None,
}
# Sends (message create, continue, regenerate) per user: "<count>/<sec|min|hour|day>"; empty turns it off.
HUB_API_SEND_RATE = env_str("HUB_API_SEND_RATE", "120/min")
if HUB_API_SEND_RATE and not _re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", HUB_API_SEND_RATE):
    raise ConfigurationError(f"HUB_API_SEND_RATE={HUB_API_SEND_RATE!r} is not like 120/min.")
# The largest request body the API reads (bytes); larger ones answer 413. Imports may be larger.
HUB_API_MAX_BODY_BYTES = env_int("HUB_API_MAX_BODY_BYTES", 1024 * 1024)
HUB_API_MAX_IMPORT_BYTES = env_int("HUB_API_MAX_IMPORT_BYTES", 50 * 1024 * 1024)
SPECTACULAR_SETTINGS = {
    "TITLE": "Hub API",
    "DESCRIPTION": "Everything a user can do in the browser, over HTTP. See docs/api.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI from static/vendor (swagger-ui-dist from npm), not a CDN: a hub may be offline.
    "SWAGGER_UI_DIST": "/static/vendor/swagger-ui",
    "SWAGGER_UI_FAVICON_HREF": "/static/vendor/swagger-ui/favicon-32x32.png",
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True, "displayOperationId": True},
}

# --- Static files, i18n, logging ------------------------------------------------------------
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    # Files in chats: under HUB_DATA_DIR, or an S3-compatible store shared by every host
    # (HUB_STORAGE_URL, hub.environment.storage_from_url).
    "default": storage_from_url(env_str("HUB_STORAGE_URL"), DATA_DIR / "media"),
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        "celery": {"level": "WARNING"},
    },
}
