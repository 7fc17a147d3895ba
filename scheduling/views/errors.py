"""Error pages in the site's layout, saying why and where to go (templates/403.html, 404.html, 500.html).

Bad query parameters: a 400 page naming the parameter and the rule, with a link back. A page's Http404:
templates/404.html. Middleware hooks rather than ``handler400``/``handler404``: Django shows its debug
pages instead of the handlers when DEBUG is on (the demo), and ``handler400`` also answers
SuspiciousOperation, whose messages are not for users; an address no URL pattern matches is answered with
templates/404.html too, DEBUG or not (the debug 404 lists every pattern). A 403 always goes through Django's
handler, which renders templates/403.html with the reason; the API answers its own errors in JSON before this runs.
"""

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import render

from .common import BadQuery, TableCsv


class ErrorPageMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.DEBUG and isinstance(response, HttpResponseNotFound) and request.resolver_match is None:
            # A mistyped address with DEBUG on (`make demo`): Django's debug page would list every URL pattern
            # to whoever typed it; the layout's 404 says where to go instead, as in production.
            return render(request, "404.html", {"request_path": request.path}, status=404)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, TableCsv):
            return exception.response
        if isinstance(exception, BadQuery):
            context = {"problem": str(exception), "without": _without(request, exception.parameter)}
            return render(request, "scheduling/bad_query.html", context, status=400)
        if isinstance(exception, Http404):
            return render(request, "404.html", {"request_path": request.path}, status=404)
        return None


def _without(request: HttpRequest, parameter: str) -> str:
    """The same page and query, less the parameter at fault."""
    query = request.GET.copy()
    query.pop(parameter, None)
    return f"{request.path}?{query.urlencode()}" if query else request.path
