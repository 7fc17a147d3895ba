"""Sizes of free text people type, one constant per kind, shared by the forms, the API and the services.

Bounded because every one of them is stored and shown again (history rows, e-mails, pages): an unbounded
field lets one request store megabytes. Plain constants, no Django, so any layer may import them.
"""

# A decision comment (approve, deny), a revocation or any other audit reason stored with a change.
COMMENT_MAX_CHARS = 2000
# A quota request's justification: a paragraph or two on what the GPUs are for.
JUSTIFICATION_MAX_CHARS = 4000
# Levels of nesting in a JSON body or JSON field: our documents need a handful; a thousand levels made the
# decoder raise RecursionError (a 500), and fewer still can exhaust the stack where a document is walked.
MAX_JSON_DEPTH = 64

NUL = "\x00"
NUL_RULE = "must not contain the NUL character (U+0000): PostgreSQL cannot store it"
DEPTH_RULE = f"JSON nested too deep: at most {MAX_JSON_DEPTH} levels"


def json_problem(document: object) -> tuple[tuple[object, ...], str] | None:
    """Where a decoded JSON document holds something the database cannot store, and the rule; None if nothing.

    Iterative, so a document too deep for recursion is measured without recursing."""
    stack: list[tuple[tuple[object, ...], object, int]] = [((), document, 1)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, str) and NUL in item:
            return path, NUL_RULE
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            return path, DEPTH_RULE
        for key, child in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(key, str) and NUL in key:
                return (*path, key), NUL_RULE
            stack.append(((*path, key), child, depth + 1))
    return None


def json_path(path: tuple[object, ...]) -> str:
    """``options.rebalance.dry_run`` or ``gpu_uuids[0]``: a place in a document as people write it."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text
