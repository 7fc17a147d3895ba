"""Optimistic concurrency on the API (issue 36): ``ETag`` out, ``If-Match`` (or a body's ``version``) back in.

The rule itself is services/versions.py; a stale version answers 412 with what changed (api/errors.py)."""

from scheduling.services import versions

from .serializers import VersionedReasonSerializer


class VersionETagMixin:
    """A versioned row's answer carries ``ETag: "<version>"``; send it back as ``If-Match`` with an edit or a
    decision, and a row changed since answers 412 with what changed (services/versions.py)."""

    def finalize_response(self, request, response, *args, **kwargs):
        data = getattr(response, "data", None)
        if isinstance(data, dict) and "version" in data and "id" in data and response.status_code < 300:
            response["ETag"] = f'"{data["version"]}"'
        return super().finalize_response(request, response, *args, **kwargs)


def if_match(request) -> int | None:
    return versions.parse_if_match(request.headers.get("If-Match"))


def seen_version(request, body_version: int | None = None) -> int | None:
    """The version a decision was made on: If-Match, else the body's ``version``, else None (unchecked)."""
    seen = if_match(request)
    return seen if seen is not None else body_version


def versioned_decision(request) -> dict:
    """A plan decision's keyword arguments for its service: the reason, and the version decided on."""
    body = VersionedReasonSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    seen = seen_version(request, body.validated_data.get("version"))
    return {"reason": body.validated_data["reason"], "seen_version": seen}
