"""Words as people write them: a name's possessive ("Recommendation models'", not "models's")."""


def possessive(name: str) -> str:
    """``name``'s, or ``name``' for a name ending in s (team names are plural nouns: "Recommendation models")."""
    return f"{name}'" if name.endswith(("s", "S")) else f"{name}'s"
