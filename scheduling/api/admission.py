"""``POST /admission/v1/mutate``: the Kubernetes API server's mutating admission webhook.

Not a DRF view: the caller is the API server, which sends an AdmissionReview and expects one back, and
authenticates by TLS. When ``GPUPORTAL_ADMISSION_TOKEN`` is set, the request must also carry it as a
bearer token (the webhook's kubeconfig ``token``), so nobody else can fill the decision log. A body that
is not an AdmissionReview v1 is a 400 naming what is wrong.
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from scheduling.services import admission


@csrf_exempt
@require_POST
def mutate(request: HttpRequest) -> JsonResponse:
    token = getattr(settings, "GPUPORTAL_ADMISSION_TOKEN", "")
    if token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return JsonResponse({"error": "a valid bearer token is required"}, status=401)
    length = int(request.headers.get("Content-Length") or 0)
    if length > admission.MAX_BODY_BYTES:
        return JsonResponse({"error": f"body of {length} bytes is over the {admission.MAX_BODY_BYTES}-byte limit"},
                            status=400)
    try:
        review = admission.parse_review(request.body)
    except admission.BadReview as error:
        return JsonResponse({"error": str(error)}, status=400)
    return JsonResponse(admission.review_response(review, admission.admit(review)))
