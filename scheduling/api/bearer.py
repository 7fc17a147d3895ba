"""The one check of a shared bearer token (``Authorization: Bearer <token>``): /metrics and /health's details
(``METRICS_TOKEN``) and the admission webhook (``GPUPORTAL_ADMISSION_TOKEN``) both ask it."""

import hmac

from django.http import HttpRequest


def presents_bearer(request: HttpRequest, token: str) -> bool:
    """True when ``token`` is set and the request carries exactly it. Compared as bytes in constant time:
    ``compare_digest`` refuses non-ASCII text, and a header is whatever the client sent (WSGI hands it over
    as latin-1 text), so a non-ASCII header is a wrong token, never an error."""
    if not token:
        return False
    presented = request.headers.get("Authorization", "")
    return hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), f"Bearer {token}".encode())
