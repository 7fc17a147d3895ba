"""The admission webhook process's URLs (``gpuportal.settings_admission``): the webhook, health and metrics.
Errors are JSON: the pages' templates (and the URLs they link) are not served here."""

from django.http import JsonResponse
from django.urls import path

from scheduling.api.admission import mutate
from scheduling.api.metrics import metrics_view
from scheduling.api.views import health

urlpatterns = [
    path("admission/v1/mutate", mutate, name="admission-mutate"),
    path("metrics", metrics_view, name="metrics"),
    path("health", health, name="health"),
]


def not_found(request, exception=None):
    return JsonResponse({"error": f"{request.path} is not served by the admission webhook process"}, status=404)


def server_error(request):
    return JsonResponse({"error": "internal error of the admission webhook process"}, status=500)


handler404 = not_found
handler500 = server_error
