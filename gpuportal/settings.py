"""Settings from the environment (django-environ); defaults give the embedded demo.

The embedded default needs no service: SQLite under var/ and Celery on a filesystem broker. Production
sets DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis); see README.md.
"""

from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab
from csp import constants as csp
from django.core.exceptions import ImproperlyConfigured

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
    "axes",
    "csp",
    "django_prometheus",
    "rules.apps.AutodiscoverRulesConfig",
    "scheduling",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # first and last: HTTP metrics for /metrics
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "scheduling.views.request_scope.TeamTreeScopeMiddleware",  # the team tree read once per request
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "scheduling.views.errors.ErrorPageMiddleware",  # a bad query parameter (400) and a page's 404, in the layout
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    "axes.middleware.AxesMiddleware",  # last but the metrics, as axes asks: a lockout becomes our lockout page
    "django_prometheus.middleware.PrometheusAfterMiddleware",
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
                "scheduling.views.context.openable_teams",  # pages link only the team pages one may open
                "scheduling.views.context.inbox",  # the unread count in the navigation
            ],
        },
    },
]

# <select> in Python, the same markup: Django's template includes a template per <option> (gpuportal/form_renderer.py).
FORM_RENDERER = "gpuportal.form_renderer.PortalFormRenderer"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'gpuportal.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's web server and worker write at once: WAL lets readers proceed, IMMEDIATE avoids
    # "database is locked" on upgrade from read to write, and the timeout waits instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    # A kept connection is tested (SELECT 1) before its first use in each request: after a database restart a
    # web worker reconnects instead of failing one more request on its dead connection (issue 36 item 9).
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=True))
    # A database that does not answer is a failed connection after this long, not a hung request (/health too).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT_S", default=5)
    )
# The same backends, counting queries, errors and connections for /metrics (django-prometheus).
_INSTRUMENTED = {
    "django.db.backends.sqlite3": "django_prometheus.db.backends.sqlite3",
    "django.db.backends.postgresql": "django_prometheus.db.backends.postgresql",
}
DATABASES["default"]["ENGINE"] = _INSTRUMENTED.get(DATABASES["default"]["ENGINE"], DATABASES["default"]["ENGINE"])
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Audit reasons and decision comments are stored whole in the history (scheduling/limits.py bounds them);
# simple-history's default varchar(100) made a longer comment fail the decision on PostgreSQL.
SIMPLE_HISTORY_HISTORY_CHANGE_REASON_USE_TEXT_FIELD = True
# SQLite cannot enforce NULLS NOT DISTINCT; rollups are rebuilt by delete-then-insert, so nothing relies on it.
# axes.W006 asks for ip_address among the lockout parameters (so rotating user agents cannot dodge a lock by
# name and agent): ours lock by username alone, which no header changes, and an address must never lock an
# account by other names' failures (issue 29, docs/security.md).
SILENCED_SYSTEM_CHECKS = ["models.W047", "axes.W006"]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: a locked-out caller is refused before any password check
    "rules.permissions.ObjectPermissionBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Brute force: after AXES_FAILURE_LIMIT wrong passwords for an account, that account is locked out of the
# sign-in form, the admin's and the API's token endpoint for the cool-off (0 minutes: until an admin unlocks
# it), from every address. Only its own name's failures count: an address's failures at other names never lock
# an existing account (behind a shared proxy or NAT one client would lock out everyone). docs/security.md.
AXES_FAILURE_LIMIT = env.int("GPUPORTAL_SIGNIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("GPUPORTAL_SIGNIN_LOCKOUT_MINUTES", default=15)) or None
AXES_LOCKOUT_PARAMETERS = ["username"]
# Guesses at a locked account do not renew its lockout: an anonymous client could otherwise keep anyone locked
# out for ever with one wrong password per cool-off.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A success must not clear the counts (axes would clear more than that account's, by address).
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "scheduling.views.accounts.locked_out"
# Behind N reverse proxies the client's address is the one the nearest of them appended to X-Forwarded-For.
GPUPORTAL_PROXY_COUNT = env.int("GPUPORTAL_PROXY_COUNT", default=0)
if GPUPORTAL_PROXY_COUNT:
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    AXES_IPWARE_PROXY_COUNT = GPUPORTAL_PROXY_COUNT
    AXES_IPWARE_PROXY_ORDER = "right-most"
# Sign-in through the site's directory and/or OIDC provider (docs/identity.md); both off by default, local
# accounts always work (ModelBackend first: break-glass admins). Users are created at the first sign-in, and
# their team memberships follow their groups through the admins' GroupMapping rules.
GPUPORTAL_LDAP_SERVER_URI = env.str("GPUPORTAL_LDAP_SERVER_URI", default="")
if GPUPORTAL_LDAP_SERVER_URI:
    try:
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, LDAPSearch, PosixGroupType
    except ImportError as missing:
        raise ImproperlyConfigured(
            f"GPUPORTAL_LDAP_SERVER_URI is set but LDAP support is not installed ({missing}): run "
            "`make install-ldap` (needs Debian's libldap-dev and libsasl2-dev), or pip install '.[ldap]'"
        ) from missing

    AUTH_LDAP_SERVER_URI = GPUPORTAL_LDAP_SERVER_URI
    AUTH_LDAP_START_TLS = env.bool("GPUPORTAL_LDAP_START_TLS", default=False)
    AUTH_LDAP_BIND_DN = env.str("GPUPORTAL_LDAP_BIND_DN", default="")
    AUTH_LDAP_BIND_PASSWORD = env.str("GPUPORTAL_LDAP_BIND_PASSWORD", default="")
    AUTH_LDAP_USER_SEARCH = LDAPSearch(
        env.str("GPUPORTAL_LDAP_USER_BASE"),
        ldap.SCOPE_SUBTREE,
        env.str("GPUPORTAL_LDAP_USER_FILTER", default="(uid=%(user)s)"),
    )
    AUTH_LDAP_GROUP_SEARCH = LDAPSearch(
        env.str("GPUPORTAL_LDAP_GROUP_BASE"),
        ldap.SCOPE_SUBTREE,
        env.str("GPUPORTAL_LDAP_GROUP_FILTER", default="(objectClass=groupOfNames)"),
    )
    AUTH_LDAP_GROUP_TYPE = {"groupOfNames": GroupOfNamesType(), "posixGroup": PosixGroupType()}[
        env.str("GPUPORTAL_LDAP_GROUP_TYPE", default="groupOfNames")
    ]
    AUTH_LDAP_USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
    AUTH_LDAP_CACHE_TIMEOUT = 0  # every sign-in and re-sync reads the groups afresh
    AUTHENTICATION_BACKENDS.append("scheduling.services.directory_ldap.PortalLDAPBackend")
GPUPORTAL_OIDC_GROUPS_CLAIM = env.str("GPUPORTAL_OIDC_GROUPS_CLAIM", default="groups")
OIDC_RP_CLIENT_ID = env.str("GPUPORTAL_OIDC_CLIENT_ID", default="")
if OIDC_RP_CLIENT_ID:
    OIDC_RP_CLIENT_SECRET = env.str("GPUPORTAL_OIDC_CLIENT_SECRET")
    OIDC_RP_SIGN_ALGO = "RS256"
    OIDC_USE_PKCE = True  # the code is useless to whoever intercepts the redirect
    OIDC_RP_SCOPES = env.str("GPUPORTAL_OIDC_SCOPES", default="openid email profile groups")
    OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("GPUPORTAL_OIDC_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = env.str("GPUPORTAL_OIDC_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = env.str("GPUPORTAL_OIDC_USERINFO_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env.str("GPUPORTAL_OIDC_JWKS_ENDPOINT")
    AUTHENTICATION_BACKENDS.append("scheduling.services.directory.PortalOIDCBackend")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Not a rule: the hook after every password change, which revokes the account's API tokens.
    {"NAME": "scheduling.services.accounts.RevokeApiTokensOnPasswordChange"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the app folders: no collectstatic step for the demo or tests. plotly.js is the
# cartesian partial bundle vendored in static/vendor/plotly (its README says why and how to update it).
WHITENOISE_USE_FINDERS = True
STATICFILES_DIRS = [BASE_DIR / "static"]
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

# Content-Security-Policy (django-csp): this site's own files only. No page has an inline script (charts are
# JSON data blocks drawn by static/js/charts.js) and plotly.js runs without eval. plotly.js does write two
# <style> elements, an empty one it fills through the CSSOM and maplibre's CSS, and empty style attributes:
# those exact texts are allowed by hash (tests/security/test_csp_browser.py names a new hash after an
# upgrade). Pages of third-party code that need more say so per view. docs/security.md.
CSP_EMPTY = "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"  # sha256 of ""
CSP_PLOTLY_MAPLIBRE_CSS = "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='"  # plotly.js 4.1
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp.SELF],
        "script-src": [csp.SELF],
        "style-src": [csp.SELF],
        "style-src-elem": [csp.SELF, CSP_EMPTY, CSP_PLOTLY_MAPLIBRE_CSS],
        "style-src-attr": [csp.UNSAFE_HASHES, CSP_EMPTY],
        # The favicon is a data: URL. A chart's PNG (the modebar's camera): plotly.js draws the chart's SVG into a
        # canvas through an <img> of a blob: URL that its own script made from the page's SVG, so only this
        # origin's scripts can make one; without blob: the camera silently saved nothing (issue 33).
        "img-src": [csp.SELF, "data:", "blob:"],
        "font-src": [csp.SELF],
        "connect-src": [csp.SELF],
        "object-src": [csp.NONE],
        "base-uri": [csp.SELF],
        "form-action": [csp.SELF],
        "frame-ancestors": [csp.NONE],
    }
}
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
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "scheduling.api.renderers.BrowsableAPIRenderer",  # DRF's, with the styles its page inlines allowed
    ],
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
    # The anonymous throttle's address as the lockout's: X-Forwarded-For only as far as our own proxies wrote it
    # (DRF's default, None, would key on the whole header, which any client can vary).
    "NUM_PROXIES": GPUPORTAL_PROXY_COUNT,
}
# List answers are reused while the tables they read are unchanged (scheduling/api/list_cache.py); 0 = off.
API_RESPONSE_CACHE_SECONDS = env.int("API_RESPONSE_CACHE_SECONDS", default=30)
# Bounds on what one client can make the cache hold (cache-busting URLs): answer size, answers per user.
API_RESPONSE_CACHE_MAX_KIB = env.int("API_RESPONSE_CACHE_MAX_KIB", default=256)
API_RESPONSE_CACHE_ENTRIES_PER_USER = env.int("API_RESPONSE_CACHE_ENTRIES_PER_USER", default=50)
# Pages served again while the tables they were drawn from are unchanged, for at most this many seconds (they
# show the clock: waits, ranges ending now); scheduling/views/page_cache.py. 0 = off.
PAGE_CACHE_SECONDS = env.int("PAGE_CACHE_SECONDS", default=30)
PAGE_CACHE_MAX_KIB = env.int("PAGE_CACHE_MAX_KIB", default=1024)
PAGE_CACHE_ENTRIES_PER_USER = env.int("PAGE_CACHE_ENTRIES_PER_USER", default=30)
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
    "SERVE_PERMISSIONS": ["scheduling.api.permissions.ApiDocsAccess"],
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
# /metrics (per-team usage) and /health's details: a portal admin's session or this bearer token.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# The admission webhook (/admission/v1/mutate, served only by the admission process: settings_admission) answers
# only the API server: the bearer token it presents (its AdmissionConfiguration kubeconfig), or a TLS client
# certificate the listener verifies against this CA file (gunicorn.conf.py). Neither set and DEBUG off: closed.
GPUPORTAL_ADMISSION_TOKEN = env.str("GPUPORTAL_ADMISSION_TOKEN", default="")
GPUPORTAL_ADMISSION_CLIENT_CA = env.str("GPUPORTAL_ADMISSION_CLIENT_CA", default="")
# Admission decisions kept: pass-throughs (nothing patched, allowed) this many hours, the rest this many days.
GPUPORTAL_ADMISSION_PASSTHROUGH_HOURS = env.int("GPUPORTAL_ADMISSION_PASSTHROUGH_HOURS", default=24)
GPUPORTAL_ADMISSION_RETENTION_DAYS = env.int("GPUPORTAL_ADMISSION_RETENTION_DAYS", default=90)
# The webhook's directory (teams, quota, namespace mappings, pools) is reused this long before it asks PostgreSQL
# whether those tables changed: a change takes effect within it. 0: ask on every admission.
GPUPORTAL_ADMISSION_DIRECTORY_SECONDS = env.float("GPUPORTAL_ADMISSION_DIRECTORY_SECONDS", default=1.0)
if not 0 <= GPUPORTAL_ADMISSION_DIRECTORY_SECONDS <= 60:
    raise ImproperlyConfigured("GPUPORTAL_ADMISSION_DIRECTORY_SECONDS must be between 0 and 60 (seconds)")
# The webhook's decision rows are written by a background thread per process this often, in one INSERT (PostgreSQL;
# 0: one INSERT in each request), holding at most GPUPORTAL_ADMISSION_DECISION_BUFFER rows while the database is away.
GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS = env.float("GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS", default=0.25)
if not 0 <= GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS <= 10:
    raise ImproperlyConfigured("GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS must be between 0 and 10 (seconds)")
GPUPORTAL_ADMISSION_DECISION_BUFFER = env.int("GPUPORTAL_ADMISSION_DECISION_BUFFER", default=20_000)
if GPUPORTAL_ADMISSION_DECISION_BUFFER < 1:
    raise ImproperlyConfigured("GPUPORTAL_ADMISSION_DECISION_BUFFER must be at least 1 (rows)")
# Answers of the gpu-priority-expander to cluster-autoscaler (serve_expander), kept this long.
GPUPORTAL_EXPANDER_RETENTION_DAYS = env.int("GPUPORTAL_EXPANDER_RETENTION_DAYS", default=30)
# A GPU pod asking (by annotation) for the serving scheduler and priority its team is not granted: "lower" it to
# batch with the reason in its annotations, or "deny" it.
GPUPORTAL_ADMISSION_ESCALATION = env.str("GPUPORTAL_ADMISSION_ESCALATION", default="lower")
if GPUPORTAL_ADMISSION_ESCALATION not in ("lower", "deny"):
    raise ImproperlyConfigured(
        f"GPUPORTAL_ADMISSION_ESCALATION must be lower or deny, not {GPUPORTAL_ADMISSION_ESCALATION!r}"
    )
GPUPORTAL_PUBLIC_METRICS = env.bool("GPUPORTAL_PUBLIC_METRICS", default=False)  # 1: /metrics for anyone
GPUPORTAL_PUBLIC_API_DOCS = env.bool("GPUPORTAL_PUBLIC_API_DOCS", default=False)  # 1: schema and docs for anyone
# Orchestrator credentials references may name only files inside these directories (symlinks and ".."
# resolved first) or variables named GPUPORTAL_SECRET_*: scheduling/validators.py says why.
GPUPORTAL_CREDENTIALS_DIRS = env.list("GPUPORTAL_CREDENTIALS_DIRS", default=["/etc/gpuportal/credentials"])
# Where an orchestrator's options.governance.sacctmgr / options.accounting.sacct may point (a program of that
# name; the bare name is looked up on the worker's PATH). docs/security.md.
GPUPORTAL_SLURM_BIN_DIRS = env.list(
    "GPUPORTAL_SLURM_BIN_DIRS", default=["/usr/bin", "/usr/local/bin", "/opt/slurm/bin"]
)
# Orchestrator endpoints on this machine (loopback) are refused unless set (a slurmrestd beside the portal in
# development); link-local addresses (cloud metadata) always are. docs/security.md.
GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS = env.bool("GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS", default=False)
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
    for sub in ("out", "processed", "control"):
        (_BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "store_processed": False,
        # kombu's default is ./control, relative to wherever the worker was started (it once put its
        # exchange tables into the repository).
        "control_folder": str(_BROKER_DIR / "control"),
    }
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
# A task's message is acknowledged when it ends, and put back when its worker dies under it, so no run
# is lost with a killed worker (docs/operations.md: orphaned work).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Hard time limits (s): the soft limit, a minute earlier, lets the task record why it stopped.
GPUPORTAL_TASK_TIME_LIMITS = {
    "default": env.int("GPUPORTAL_TASK_TIME_LIMIT_S", default=600),
    "whatif": env.int("GPUPORTAL_WHATIF_TIME_LIMIT_S", default=3600),
    "report": env.int("GPUPORTAL_REPORT_TIME_LIMIT_S", default=1800),
    # one scrape of one orchestrator; its HTTP calls end within GPUPORTAL_SCRAPE_DEADLINE_S, this bounds the rest
    "scrape": env.int("GPUPORTAL_SCRAPE_TIME_LIMIT_S", default=180),
    # one collection round (the demo's step, the fragmentation sample, queueing the scrapes); its lease outlives it
    "round": env.int("GPUPORTAL_ROUND_TIME_LIMIT_S", default=180),
}
# Every HTTP call a scrape makes ends within this many seconds in all (scheduling/collectors/deadline.py):
# httpx's timeouts restart with each byte, so a trickling endpoint held a worker slot for 9 minutes (issue 36).
GPUPORTAL_SCRAPE_DEADLINE_S = env.float("GPUPORTAL_SCRAPE_DEADLINE_S", default=90.0)
# Scrapes have a queue of their own, served by the collector worker (compose `collector`, deploy/k8s/worker.yaml,
# rundemo), so a slow orchestrator takes only collector slots: governance, the reaper, what-ifs and reports
# keep their worker. "" puts scrapes on the default queue (one worker serves everything).
GPUPORTAL_COLLECT_QUEUE = env.str("GPUPORTAL_COLLECT_QUEUE", default="collect")
if GPUPORTAL_COLLECT_QUEUE:
    CELERY_TASK_ROUTES = {
        "scheduling.tasks.scrape_orchestrator": {"queue": GPUPORTAL_COLLECT_QUEUE},
        "scheduling.tasks.collector_heartbeat": {"queue": GPUPORTAL_COLLECT_QUEUE},
    }
CELERY_TASK_TIME_LIMIT = GPUPORTAL_TASK_TIME_LIMITS["default"]
CELERY_TASK_SOFT_TIME_LIMIT = GPUPORTAL_TASK_TIME_LIMITS["default"] - 60
# Redis hands an unacknowledged message to another worker after this long; it must outlast the longest
# hard limit or a long run would be started twice while its first worker is still busy with it.
CELERY_VISIBILITY_TIMEOUT_S = env.int(
    "CELERY_VISIBILITY_TIMEOUT_S", default=max(GPUPORTAL_TASK_TIME_LIMITS.values()) + 600
)
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_S,
        # A hung Redis (stopped, or a dead peer) costs a publish seconds, not forever; the read timeout
        # must stay above the worker's 1 s BRPOP poll.
        "socket_connect_timeout": env.float("CELERY_BROKER_CONNECT_TIMEOUT_S", default=1.0),
        "socket_timeout": env.float("CELERY_BROKER_SOCKET_TIMEOUT_S", default=2.0),
        # How often a worker looks for messages whose worker died (restore_visible), in seconds.
        "unacked_restore_interval": env.int("CELERY_UNACKED_RESTORE_INTERVAL_S", default=10),
        "unacked_restore_throttle": 1,
    }
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0
# A publish retries briefly, then fails: the caller marks the row failed and answers 503 (never a row
# left queued with no message behind it). Worst case with a hung broker: about 3 x socket_timeout (publish,
# reconnect, retry: ~6 s, benchmarks/health_under_faults.py); a refused connection fails in under a second.
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0.25,
    "interval_step": 0.25,
    "interval_max": 0.5,
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
GPUPORTAL_ROUND_SECONDS = env.int("GPUPORTAL_ROUND_SECONDS", default=30)
# A change the clusters must enforce (a grant approved or revoked, shares saved) asks for a governance round this
# many seconds after it commits, so a burst of changes makes one round (services/governance_trigger.py).
GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S = env.float("GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S", default=2.0)
# ONE governance round at a time: a round in progress holds its lease while its heartbeat (written before each
# orchestrator) is younger than this; older, its worker is taken for dead and the next round closes it as cut short.
GPUPORTAL_GOVERNANCE_ROUND_STALE_S = env.int("GPUPORTAL_GOVERNANCE_ROUND_STALE_S", default=600)
# A triggered round that finds an older round in progress tries again this many seconds later.
GPUPORTAL_GOVERNANCE_BUSY_RETRY_S = env.int("GPUPORTAL_GOVERNANCE_BUSY_RETRY_S", default=10)
GPUPORTAL_GOVERNANCE_BUSY_RETRIES = env.int("GPUPORTAL_GOVERNANCE_BUSY_RETRIES", default=60)
GPUPORTAL_DEMO_SPEEDUP = env.float("GPUPORTAL_DEMO_SPEEDUP", default=6.0)  # trace seconds per real second
# 1: this database is a throwaway demo, so demo_setup may create admin/admin in it (make demo passes a flag).
GPUPORTAL_DEMO = env.bool("GPUPORTAL_DEMO", default=False)
# Raw scrape rows (usage and fragmentation samples, collector and governance runs) are kept this many days until an
# admin sets the period (HistoryRetention in the admin, audited); hourly and daily rollups are kept for ever.
GPUPORTAL_SAMPLE_RETENTION_DAYS = env.int("GPUPORTAL_SAMPLE_RETENTION_DAYS", default=14)
GPUPORTAL_BASE_URL = env.str("GPUPORTAL_BASE_URL", default="http://127.0.0.1:8000")  # links in alert and report emails
# Chat webhooks (issue 33 item 13): each message is posted by a Celery task with this timeout, retried this many
# times with a growing delay (base * 2**retry seconds); the last error shows on /notifications/webhooks/.
GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S = env.float("GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S", default=5.0)
GPUPORTAL_CHAT_WEBHOOK_RETRIES = env.int("GPUPORTAL_CHAT_WEBHOOK_RETRIES", default=3)
GPUPORTAL_CHAT_WEBHOOK_RETRY_BASE_S = env.int("GPUPORTAL_CHAT_WEBHOOK_RETRY_BASE_S", default=10)
# Quota request periods (issue 16): the longest period, the farthest a start may lie ahead, the most it may be
# backdated. Unbounded periods (0001-01-01 to 9999-12-31) were accepted and approvable before.
GPUPORTAL_QUOTA_MAX_DAYS = env.int("GPUPORTAL_QUOTA_MAX_DAYS", default=366)
# How long before a grant ends its requester and the team's leads are reminded (once per grant).
GPUPORTAL_GRANT_REMINDER_DAYS = env.int("GPUPORTAL_GRANT_REMINDER_DAYS", default=7)
GPUPORTAL_QUOTA_MAX_LEAD_DAYS = env.int("GPUPORTAL_QUOTA_MAX_LEAD_DAYS", default=366)
GPUPORTAL_QUOTA_MAX_BACKDATE_DAYS = env.int("GPUPORTAL_QUOTA_MAX_BACKDATE_DAYS", default=7)
GPUPORTAL_LEDGER = {  # issue 10, docs/ledger.md
    "orphan_after_s": env.float("GPUPORTAL_LEDGER_ORPHAN_AFTER_S", default=900.0),
    "stale_after_s": env.float("GPUPORTAL_LEDGER_STALE_AFTER_S", default=300.0),
}
# /health counts freshness (services/freshness.py): a worker heartbeat, the last good round, each source's age.
GPUPORTAL_HEARTBEAT_S = env.float("GPUPORTAL_HEARTBEAT_S", default=15.0)
GPUPORTAL_HEALTH = {
    "worker_stale_after_s": env.float("GPUPORTAL_WORKER_STALE_AFTER_S", default=120.0),
    "round_stale_after_s": env.float("GPUPORTAL_ROUND_STALE_AFTER_S", default=max(4 * GPUPORTAL_ROUND_SECONDS, 180)),
    "source_stale_after_s": env.float("GPUPORTAL_SOURCE_STALE_AFTER_S", default=300.0),
}
CELERY_BEAT_SCHEDULE = {
    "collect-and-decide": {"task": "scheduling.tasks.run_round", "schedule": GPUPORTAL_ROUND_SECONDS},
    "worker-heartbeat": {"task": "scheduling.tasks.heartbeat", "schedule": GPUPORTAL_HEARTBEAT_S},
    "collector-heartbeat": {"task": "scheduling.tasks.collector_heartbeat", "schedule": GPUPORTAL_HEARTBEAT_S},
    "rebalance": {"task": "scheduling.tasks.propose_rebalance", "schedule": 300},
    # issue 18: governance read back, diffed and enforced (auto) or planned (review) every round
    "reconcile-governance": {"task": "scheduling.tasks.reconcile_governance", "schedule": GPUPORTAL_ROUND_SECONDS},
    # issue 31: borrowed GPUs back for teams below their guarantee (review: a plan; auto: applied)
    "reclaim": {"task": "scheduling.tasks.reclaim_round", "schedule": GPUPORTAL_ROUND_SECONDS},
    "expire-quota-grants": {"task": "scheduling.tasks.expire_grants", "schedule": crontab(minute="*/5")},
    "remind-expiring-grants": {"task": "scheduling.tasks.remind_expiring_grants", "schedule": crontab(minute=23)},
    "compact-table-changes": {"task": "scheduling.tasks.compact_table_changes", "schedule": 60},
    "reap-stale-work": {"task": "scheduling.tasks.reap_stale_work", "schedule": 60},
    # docs/identity.md: LDAP users' groups searched again, OIDC users' last claims mapped again
    "resync-identities": {"task": "scheduling.tasks.resync_identities", "schedule": crontab(minute="*/15")},
    "purge-idempotency-keys": {"task": "scheduling.tasks.purge_idempotency_keys", "schedule": crontab(minute=17)},
    "prune-admission-decisions": {"task": "scheduling.tasks.prune_admission_decisions", "schedule": crontab(minute=41)},
    "prune-expander-decisions": {"task": "scheduling.tasks.prune_expander_decisions", "schedule": crontab(minute=43)},
    # Raw scrape rows past the admin's retention (HistoryRetention; rollups stay), in batches: an hour's rows a run.
    "prune-raw-history": {"task": "scheduling.tasks.prune_raw_history", "schedule": crontab(minute=47)},
    # Mondays 07:00 in TIME_ZONE (CELERY_TIMEZONE): last week's capacity report, built and mailed once.
    "weekly-capacity-report": {
        "task": "scheduling.tasks.weekly_capacity_report",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
}
# A report an admin asked for that is still generating this long after its claim may be asked for again.
GPUPORTAL_REPORT_RETRY_AFTER_S = env.float("GPUPORTAL_REPORT_RETRY_AFTER_S", default=120.0)
# A source is stale in the weekly report once its last success is older than this.
GPUPORTAL_REPORT_STALE_AFTER_S = env.float("GPUPORTAL_REPORT_STALE_AFTER_S", default=600.0)
# The reaper (scheduling/services/reaper.py): when a long task's row counts as orphaned.
GPUPORTAL_REAPER = {
    # queued this long with no worker starting it: its message was lost, so it is queued again
    "queued_after_s": env.float("GPUPORTAL_REAPER_QUEUED_AFTER_S", default=900.0),
    # running with no heartbeat this long: past a redelivery of its message, so its worker and message are gone
    "running_after_s": env.float("GPUPORTAL_REAPER_RUNNING_AFTER_S", default=CELERY_VISIBILITY_TIMEOUT_S + 300.0),
    # running with no progress this long (a running what-if writes one at least every 30 s): its worker or
    # database was lost; the run is queued again at once instead of waiting out the visibility timeout (issue 36)
    "stalled_after_s": env.float("GPUPORTAL_REAPER_STALLED_AFTER_S", default=300.0),
    # an applying rebalance plan with no step finished this long is failed (its nodes rolled back)
    "plan_after_s": env.float("GPUPORTAL_REAPER_PLAN_AFTER_S", default=1800.0),
    "max_attempts": env.int("GPUPORTAL_REAPER_MAX_ATTEMPTS", default=3),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every record passes the secrets filter: a traceback may quote a credential an orchestrator echoed.
    "filters": {"secrets": {"()": "scheduling.redact.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["secrets"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # WeasyPrint logs each layout step at INFO; only its warnings (a missing font, a bad CSS rule) matter.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "weasyprint": {"level": "WARNING"}},
}
