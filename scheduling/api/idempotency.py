"""The ``Idempotency-Key`` request header (IETF draft "The Idempotency-Key HTTP Header Field"): read and checked
here, honoured by ``services/idempotency.py``."""

import re

from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError

IDEMPOTENCY_HEADER = "Idempotency-Key"
KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII: what a header carries safely, and the column holds
KEY_RULE = "must be 1 to 255 visible ASCII characters (a random UUID is a good key)"
IDEMPOTENCY_KEY = OpenApiParameter(
    IDEMPOTENCY_HEADER,
    str,
    OpenApiParameter.HEADER,
    description="A key of your choosing for this request. Sent again within a day with the same body, it gets "
    "the first answer (200, header Idempotent-Replayed) instead of a duplicate; with another body, a 422.",
)


def idempotency_key(request) -> str | None:
    """The request's key, None when it sends none; a 400 naming the header when it is malformed."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not KEY.fullmatch(key):
        raise ValidationError({IDEMPOTENCY_HEADER: [KEY_RULE]})
    return key
