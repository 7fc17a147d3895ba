"""Service errors become JSON that names the field and the rule, never a 500."""

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from rest_framework import exceptions
from rest_framework.views import exception_handler as drf_exception_handler

from scheduling.services.dispatch import EnqueueFailed
from scheduling.services.versions import StaleVersion


class ServiceUnavailable(exceptions.APIException):
    status_code = 503
    default_detail = "A service the portal needs is unavailable; try again shortly."
    default_code = "service_unavailable"


class PreconditionFailed(exceptions.APIException):
    """An edit or decision made on an old version (If-Match or ``version``): what changed since is in the body."""

    status_code = 412
    default_code = "stale_version"


class BodyTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "body_too_large"


def exception_handler(exc, context):
    if isinstance(exc, StaleVersion):
        exc = PreconditionFailed({"version": exc.stale})
    elif isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, RequestDataTooBig):  # Django's bare 400 page said nothing of the limit
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = BodyTooLarge(f"request body: at most {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)")
    elif isinstance(exc, EnqueueFailed):  # the row was stored and already marked failed with this reason
        exc = ServiceUnavailable(str(exc))
    elif isinstance(exc, OperationalError | InterfaceError):
        return _database_unavailable(exc, context)
    return drf_exception_handler(exc, context)


DATABASE_RETRY_AFTER_S = 10


def _database_unavailable(exc: DatabaseError, context):
    """A database outage is the client's 503 with Retry-After, as JSON, never a 500 page (issue 36 item 9).
    The broken connection is dropped so this worker's next request connects anew."""
    connection.close_if_unusable_or_obsolete()
    response = drf_exception_handler(
        ServiceUnavailable("The database is unavailable; try again shortly."), context
    )
    if response is not None:
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    return response
