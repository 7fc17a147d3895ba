"""Sizes of free text people type, one constant per kind, shared by the forms, the API and the services.

Bounded because every one of them is stored and shown again (history rows, e-mails, pages): an unbounded
field lets one request store megabytes. Plain constants, no Django, so any layer may import them.
"""

# A decision comment (approve, deny), a revocation or any other audit reason stored with a change.
COMMENT_MAX_CHARS = 2000
# A quota request's justification: a paragraph or two on what the GPUs are for.
JUSTIFICATION_MAX_CHARS = 4000
