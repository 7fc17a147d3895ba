"""gunicorn settings for the production stack (docker-compose, benchmarks/api_load.py).

gunicorn reads ``./gunicorn.conf.py`` from its working directory by default; compose names it anyway.
Command-line options (``-b``, ``-w``) still win over what is set here.
"""

import os
import ssl
import sys

import gunicorn.http.wsgi


def on_starting(server) -> None:
    """Drop the ``Server: gunicorn`` response header (a scanner's first hint at which exploits to try).

    gunicorn has no option for it: every response starts with the lines of ``Response.default_headers``,
    ``Server`` among them. The master runs this hook before it forks any worker, so each worker inherits
    the filtered method.
    """
    response = gunicorn.http.wsgi.Response
    original = response.default_headers

    def default_headers(self):
        return [line for line in original(self) if not line.lower().startswith("server:")]

    response.default_headers = default_headers


def _admission_client_ca() -> str:
    """The CA whose client certificates the admission process's TLS listener demands (the API server's, set in
    its AdmissionConfiguration), or "": only the webhook's own process, never the portal's web port."""
    if os.environ.get("DJANGO_SETTINGS_MODULE") != "gpuportal.settings_admission":
        return ""
    return os.environ.get("GPUPORTAL_ADMISSION_CLIENT_CA", "")


if _admission_client_ca():
    # A caller without a certificate signed by this CA is refused in the TLS handshake, before any view runs.
    ca_certs = _admission_client_ca()
    cert_reqs = ssl.CERT_REQUIRED


def worker_exit(server, worker) -> None:
    """A worker writes the admission decisions it still holds before it exits (services/admission_log: batched)."""
    log = sys.modules.get("scheduling.services.admission_log")
    if log is not None:
        log.flush_at_exit()
