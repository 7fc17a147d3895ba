"""Slurm host lists: ``dgx[01-03,07]`` <-> ``dgx01 dgx02 dgx03 dgx07`` (zero padding kept)."""

from __future__ import annotations

import re

_BRACKET = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\]]+)\](?P<rest>.*)$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets: ``a[1-2],b3`` -> ``["a[1-2]", "b3"]``."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _expand_ranges(ranges: str) -> list[str]:
    values: list[str] = []
    for item in ranges.split(","):
        if "-" in item:
            start, end = item.split("-", 1)
            width = len(start)
            values.extend(str(i).zfill(width) for i in range(int(start), int(end) + 1))
        else:
            values.append(item)
    return values


def _expand_one(pattern: str) -> list[str]:
    match = _BRACKET.match(pattern)
    if not match:
        return [pattern]
    heads = [match["prefix"] + v for v in _expand_ranges(match["ranges"])]
    tails = _expand_one(match["rest"]) if match["rest"] else [""]
    return [h + t for h in heads for t in tails]


def expand_hostlist(text: str | None) -> list[str]:
    """Every host named by a Slurm host list, in order; ``""``/``None``/``(null)`` give ``[]``."""
    if not text or text in ("(null)", "None"):
        return []
    hosts: list[str] = []
    for part in _split_top_level(text):
        hosts.extend(_expand_one(part))
    return hosts


def count_index_list(text: str) -> int:
    """How many numbers a Slurm index list names: ``0-3`` -> 4, ``1,3,5-7%2`` -> 5, ``N/A`` -> 0."""
    text = text.split("%", 1)[0].strip()
    if not text or text == "N/A":
        return 0
    return len(_expand_ranges(text))


def index_list(text: str) -> tuple[int, ...]:
    """The numbers of a Slurm index list (``0-2,5`` -> ``(0, 1, 2, 5)``)."""
    text = text.split("%", 1)[0].strip()
    if not text or text == "N/A":
        return ()
    return tuple(int(v) for v in _expand_ranges(text))
