"""Words as people write them: a name's possessive ("Recommendation models'", not "models's"), counts with
their noun in the right number ("1 GPU", "2 GPUs", never "1 GPUs" or "GPU(s)"), and a field's error that
names its field once ("GPUs must be at least 1", not "GPUs: GPUs must be at least 1")."""


def possessive(name: str) -> str:
    """``name``'s, or ``name``' for a name ending in s (team names are plural nouns: "Recommendation models")."""
    return f"{name}'" if name.endswith(("s", "S")) else f"{name}'s"


def plural(count: int | float, noun: str, nouns: str | None = None) -> str:
    """'1 GPU', '2 GPUs', '0.5 GPUs', '1 week': counts as people write them; ``nouns`` for an irregular plural."""
    return f"{count:g} {noun if count == 1 else nouns or noun + 's'}"


def labelled(label: str, message: str) -> str:
    """``label: message``, unless the message already starts with the label (any case): then the message."""
    if not label or message.casefold().startswith(label.casefold()):
        return message
    return f"{label}: {message}"
