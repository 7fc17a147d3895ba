"""``{{ seconds|duration }}``: a wait or a runtime as people read it ("11 h 25 min"), not "41101 s"."""

from django import template

register = template.Library()
UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


@register.filter
def duration(seconds: float | int | str | None) -> str:
    """The two largest units, rounded to the smaller one (carrying: 7199.6 s is "2 h"); "—" without a value."""
    try:
        total = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    if not total >= 0:  # negative or NaN
        return "—"
    largest = next((i for i, (_name, size) in enumerate(UNITS) if total >= size), len(UNITS) - 1)
    step = UNITS[min(largest + 1, len(UNITS) - 1)][1]
    total = round(total / step) * step
    largest = next((i for i, (_name, size) in enumerate(UNITS) if total >= size), len(UNITS) - 1)
    name, size = UNITS[largest]
    first, rest = divmod(int(total), size)
    parts = [f"{first} {name}"]
    if largest + 1 < len(UNITS) and rest // UNITS[largest + 1][1]:
        parts.append(f"{rest // UNITS[largest + 1][1]} {UNITS[largest + 1][0]}")
    return " ".join(parts)


@register.filter
def signed_duration(seconds: float | int | str | None) -> str:
    """A change of a duration: "+1 h 8 min", "−25 s", "0 s"; "—" without a value."""
    try:
        total = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    if total != total:  # NaN
        return "—"
    sign = "+" if total > 0 else "−" if total < 0 else ""
    return sign + duration(abs(total))
