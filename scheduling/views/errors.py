"""Bad query parameters on a page: a 400 page naming the parameter and the rule, with a link back.

A middleware hook rather than ``handler400``: Django shows its debug page instead of ``handler400`` when
DEBUG is on (the demo), and ``handler400`` also answers SuspiciousOperation, whose messages are not for users.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .common import BadQuery


class BadQueryMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, BadQuery):
            return None
        context = {"problem": str(exception), "without": _without(request, exception.parameter)}
        return render(request, "scheduling/bad_query.html", context, status=400)


def _without(request: HttpRequest, parameter: str) -> str:
    """The same page and query, less the parameter at fault."""
    query = request.GET.copy()
    query.pop(parameter, None)
    return f"{request.path}?{query.urlencode()}" if query else request.path
