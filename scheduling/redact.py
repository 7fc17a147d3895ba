"""Secret values never reach a stored or logged error: one function masks them, fed with the resolved values.

Error text about an orchestrator is written to the database (``last_error``, collector runs, the breaker's
memory, rebalance plans) and to logs. A secret can reach that text in several spellings: as sent (httpx
echoes an illegal header value as ``b'Bearer ...\\n'``), echoed by a server in an error body, escaped by
``repr`` or JSON, percent-encoded in a URL, or base64-encoded in a basic-auth header. ``redact`` masks every
spelling of every secret it is given, in one pass (a mask is never matched again) and *before* any
truncation (a secret cut in half would no longer match).

Logs get the same treatment from :class:`RedactingFilter`, which masks the secrets this process has
resolved (``remember``): a traceback logged by Celery or Django carries no list of secrets with it.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote

MASK = "[redacted]"
# A line of a multi-line secret is masked on its own only when this long: a short line ("-----", "}")
# would mask ordinary words of the message without protecting anything.
MIN_PART = 8


def spellings(secret: str) -> set[str]:
    """Every form in which ``secret`` (or a long line of it) may appear in an error message."""
    if not secret:
        return set()
    parts = {secret, *(line.strip() for line in secret.splitlines() if len(line.strip()) >= MIN_PART)}
    forms: set[str] = set()
    for part in parts:
        forms |= {part, repr(part)[1:-1], json.dumps(part)[1:-1], quote(part, safe="")}
        forms |= {repr(part.encode(codec, "replace"))[2:-1] for codec in ("utf-8", "latin-1")}
        forms.add(base64.b64encode(part.encode()).decode())
    return {form for form in forms if form}


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every spelling of every secret replaced by ``[redacted]``."""
    forms = set().union(*(spellings(s) for s in secrets if s))
    if not text or not forms:
        return text
    # Longest first, so a secret that contains another is masked whole.
    pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
    return pattern.sub(MASK, text)


_known: set[str] = set()
_lock = threading.Lock()


def remember(secret: str) -> str:
    """Note a resolved secret so this process's logs mask it too; returns it unchanged."""
    if secret:
        with _lock:
            _known.add(secret)
    return secret


def remembered() -> frozenset[str]:
    with _lock:
        return frozenset(_known)


class RedactingFilter(logging.Filter):
    """A handler filter: masks remembered secrets in the message, its arguments and its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = remembered()
        if not secrets:
            return True
        message = record.getMessage()
        masked = redact(message, secrets)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, secrets)
        return True
