"""One team tree per request: the rules, the selectors and the context processor each ask for
``Team.objects.tree()``; inside a request they share one read (models/teams.py ``team_tree_scope``)."""

from django.http import HttpRequest, HttpResponse

from scheduling.models.teams import team_tree_scope


class TeamTreeScopeMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with team_tree_scope():
            return self.get_response(request)
