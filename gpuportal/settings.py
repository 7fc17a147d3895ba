"""Settings from the environment (django-environ); defaults give the embedded demo.

The embedded default needs no service: SQLite under var/ and Celery on a filesystem broker. Production
sets DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis); see README.md.
"""

from datetime import timedelta
from pathlib import Path

import environ
import plotly
from celery.schedules import crontab

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("GPUPORTAL_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost"]),
    TIME_ZONE=(str, "UTC"),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env("DEBUG")
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (export SECRET_KEY=...).")
    SECRET_KEY = "insecure-development-key-only-for-debug"  # nosec B105 - used only with DEBUG on
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_tables2",
    "simple_history",
    "rules.apps.AutodiscoverRulesConfig",
    "scheduling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "scheduling.views.errors.BadQueryMiddleware",  # a bad query parameter: a 400 page naming it, not a 500
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
]

ROOT_URLCONF = "gpuportal.urls"
WSGI_APPLICATION = "gpuportal.wsgi.application"
ASGI_APPLICATION = "gpuportal.asgi.application"

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

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'gpuportal.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's web server and worker write at once: WAL lets readers proceed, IMMEDIATE avoids
    # "database is locked" on upgrade from read to write, and the timeout waits instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Audit reasons and decision comments are stored whole in the history (scheduling/limits.py bounds them);
# simple-history's default varchar(100) made a longer comment fail the decision on PostgreSQL.
SIMPLE_HISTORY_HISTORY_CHANGE_REASON_USE_TEXT_FIELD = True
# SQLite cannot enforce NULLS NOT DISTINCT; rollups are rebuilt by delete-then-insert, so nothing relies on it.
SILENCED_SYSTEM_CHECKS = ["models.W047"]

AUTHENTICATION_BACKENDS = [
    "rules.permissions.ObjectPermissionBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the app and plotly wheel folders: no collectstatic step for the demo or tests.
WHITENOISE_USE_FINDERS = True
# plotly.min.js comes from the installed plotly wheel, so pages chart offline with the matching version.
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(plotly.__file__).resolve().parent / "package_data")]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gpuportal@localhost")

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if not DEBUG:
    # Production sits behind TLS; a proxy that terminates it sets X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER).
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    SESSION_COOKIE_HTTPONLY = True
if env.bool("BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "scheduling.api.auth.SingleQueryTokenAuthentication",  # knox tokens, one query per request
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["scheduling.api.fastpath.FilterBackend"],  # django-filter's, skipped when unused
    "DEFAULT_PAGINATION_CLASS": "scheduling.api.fastpath.PageNumberPagination",  # no COUNT(*) for a short page
    # DRF's parsers, refusing NUL characters and JSON nested too deep with a 400 that names the field.
    "DEFAULT_PARSER_CLASSES": [
        "scheduling.api.parsers.JSONParser",
        "scheduling.api.parsers.FormParser",
        "scheduling.api.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "scheduling.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env.str("API_THROTTLE_USER", default="3000/min"),
        "anon": env.str("API_THROTTLE_ANON", default="60/min"),
    },
}
# List answers are reused while the tables they read are unchanged (scheduling/api/list_cache.py); 0 = off.
API_RESPONSE_CACHE_SECONDS = env.int("API_RESPONSE_CACHE_SECONDS", default=30)
# Bounds on what one client can make the cache hold (cache-busting URLs): answer size, answers per user.
API_RESPONSE_CACHE_MAX_KIB = env.int("API_RESPONSE_CACHE_MAX_KIB", default=256)
API_RESPONSE_CACHE_ENTRIES_PER_USER = env.int("API_RESPONSE_CACHE_ENTRIES_PER_USER", default=50)
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env.int("API_TOKEN_TTL_DAYS", default=30)),
    "TOKEN_LIMIT_PER_USER": 20,  # nosec B105 - a count, not a secret
    "AUTO_REFRESH": False,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpuportal API",
    "DESCRIPTION": "Federation plane for one GPU fleet shared by Slurm, Kubernetes (Volcano) and Ray.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Two models call their choices "status": name each enum after its model, not after a hash.
    "ENUM_NAME_OVERRIDES": {
        "CapacityReportStatusEnum": "scheduling.models.reports.CapacityReport.Status",
        "WhatIfStatusEnum": "scheduling.models.planning.WhatIfScenario.Status",
    },
}
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Throttle counters and other caches: Redis in production (CACHE_URL=redis://...), process memory otherwise.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    CACHES["default"]["BACKEND"] = "gpuportal.cache.RedisCache"  # one client per pool, fails soft (gpuportal/cache.py)
    # A Redis that hangs costs a request at most this long before the cache is bypassed for a while.
    CACHES["default"].setdefault("OPTIONS", {}).update({"socket_connect_timeout": 0.5, "socket_timeout": 0.5})

# Celery: the embedded default is a filesystem broker under var/ so the demo's worker and web server
# share a queue without Redis. Production: CELERY_BROKER_URL=redis://...
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("out", "processed"):
        (_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
GPUPORTAL_ROUND_SECONDS = env.int("GPUPORTAL_ROUND_SECONDS", default=30)
GPUPORTAL_DEMO_SPEEDUP = env.float("GPUPORTAL_DEMO_SPEEDUP", default=6.0)  # trace seconds per real second
GPUPORTAL_SAMPLE_RETENTION_DAYS = env.int("GPUPORTAL_SAMPLE_RETENTION_DAYS", default=14)
GPUPORTAL_BASE_URL = env.str("GPUPORTAL_BASE_URL", default="http://127.0.0.1:8000")  # links in alert and report emails
GPUPORTAL_LEDGER = {  # issue 10, docs/ledger.md
    "orphan_after_s": env.float("GPUPORTAL_LEDGER_ORPHAN_AFTER_S", default=900.0),
    "stale_after_s": env.float("GPUPORTAL_LEDGER_STALE_AFTER_S", default=300.0),
}
CELERY_BEAT_SCHEDULE = {
    "collect-and-decide": {"task": "scheduling.tasks.run_round", "schedule": GPUPORTAL_ROUND_SECONDS},
    "rebalance": {"task": "scheduling.tasks.propose_rebalance", "schedule": 300},
    "expire-quota-grants": {"task": "scheduling.tasks.expire_grants", "schedule": crontab(minute="*/5")},
    "compact-table-changes": {"task": "scheduling.tasks.compact_table_changes", "schedule": 60},
    "purge-idempotency-keys": {"task": "scheduling.tasks.purge_idempotency_keys", "schedule": crontab(minute=17)},
    # Mondays 07:00 in TIME_ZONE (CELERY_TIMEZONE): last week's capacity report, built and mailed once.
    "weekly-capacity-report": {
        "task": "scheduling.tasks.weekly_capacity_report",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
}
# A source is stale in the weekly report once its last success is older than this.
GPUPORTAL_REPORT_STALE_AFTER_S = env.float("GPUPORTAL_REPORT_STALE_AFTER_S", default=600.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # WeasyPrint logs each layout step at INFO; only its warnings (a missing font, a bad CSS rule) matter.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "weasyprint": {"level": "WARNING"}},
}
