"""Settings of the admission webhook's own process (deploy/k8s/admission.yaml: ``DJANGO_SETTINGS_MODULE=
gpuportal.settings_admission``): the portal's, serving only the webhook, /health and /metrics, with only the
middleware those need.

The API server calls the webhook for every pod it creates, hundreds a second, and waits for it: the portal's
page middleware (sessions, CSRF, CSP, messages, login lockout, history, static files) cost ~0.8 ms CPU of
each call for nothing the webhook uses (docs/performance.md). Kept: the request metrics and the security
headers. /health without sessions gives its details to the bearer of METRICS_TOKEN only.
"""

from .settings import *  # noqa: F403

ROOT_URLCONF = "gpuportal.urls_admission"
MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]
