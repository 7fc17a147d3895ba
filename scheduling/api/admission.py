"""``POST /admission/v1/mutate``: the Kubernetes API server's mutating admission webhook.

Not a DRF view: the caller is the API server, which sends an AdmissionReview and expects one back. Served only by
the admission process (``gpuportal.settings_admission``, its own listener: deploy/k8s/admission.yaml), never on
the portal's public web port, and only to the API server: the request carries the bearer token
``GPUPORTAL_ADMISSION_TOKEN`` (the webhook's kubeconfig ``token`` in the API server's AdmissionConfiguration), or
the listener demands a TLS client certificate signed by ``GPUPORTAL_ADMISSION_CLIENT_CA`` (gunicorn.conf.py).
With neither set and DEBUG off the webhook is closed: every call is refused (docs/security.md). A review that is
malformed in any way is answered with an AdmissionReview that refuses it and says why, never a server error.
"""

import logging

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from scheduling.api.bearer import presents_bearer
from scheduling.services import admission

log = logging.getLogger(__name__)


@csrf_exempt
@require_POST
def mutate(request: HttpRequest) -> JsonResponse:
    refused = caller_refused(request)
    if refused:
        return JsonResponse({"error": refused}, status=403)
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        length = admission.MAX_BODY_BYTES + 1
    try:
        if length > admission.MAX_BODY_BYTES:
            raise admission.BadReview(f"body over the {admission.MAX_BODY_BYTES}-byte limit")
        review = admission.parse_review(request.body)
    except admission.BadReview as error:
        # With its uid, the API server reads the refusal (200); without one, it was no review at all (400).
        return JsonResponse(admission.refusal(error), status=200 if error.uid else 400)
    return JsonResponse(admission.review_response(review, admission.admit(review)))


def caller_refused(request: HttpRequest) -> str:
    """Why this caller may not use the webhook ("" when it may)."""
    token = settings.GPUPORTAL_ADMISSION_TOKEN
    if token:
        return "" if presents_bearer(request, token) else "the admission webhook needs its bearer token"
    if settings.GPUPORTAL_ADMISSION_CLIENT_CA or settings.DEBUG:
        return ""  # the listener verified the client certificate (or a developer's machine)
    log.error("admission webhook closed: set GPUPORTAL_ADMISSION_TOKEN or GPUPORTAL_ADMISSION_CLIENT_CA")
    return ("the admission webhook is closed: neither GPUPORTAL_ADMISSION_TOKEN nor GPUPORTAL_ADMISSION_CLIENT_CA "
            "is set")
