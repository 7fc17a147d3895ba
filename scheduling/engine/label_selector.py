"""Kubernetes ``LabelSelector`` matching (``metav1.LabelSelector``), as the API server evaluates an admission
webhook's ``namespaceSelector`` and ``objectSelector``. Pure: labels in, a bool out.

Semantics of ``metav1.LabelSelectorAsSelector``: ``matchLabels`` and ``matchExpressions`` are ANDed; an empty
selector matches everything (the API server defaults an absent webhook selector to ``{}``); ``NotIn`` and
``DoesNotExist`` match an object without the key. A selector the API server would refuse (an unknown or
miscased operator, ``In``/``NotIn`` without values, ``Exists``/``DoesNotExist`` with values) raises
:class:`SelectorError` when it is built, so a caller learns of it before matching anything. Key and value
syntax is not checked again: the API server validated it when the object was stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
# Operators that need values, and those that must have none (apimachinery's validation).
WITH_VALUES = frozenset({IN, NOT_IN})
WITHOUT_VALUES = frozenset({EXISTS, DOES_NOT_EXIST})


class SelectorError(ValueError):
    """A label selector the API server would refuse to evaluate."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry; a ``matchLabels`` pair is ``In`` with its one value."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.operator not in WITH_VALUES | WITHOUT_VALUES:
            raise SelectorError(f"label selector: {self.operator!r} is not a valid operator (key {self.key!r})")
        if self.operator in WITH_VALUES and not self.values:
            raise SelectorError(f"label selector: {self.key!r} {self.operator} needs values")
        if self.operator in WITHOUT_VALUES and self.values:
            raise SelectorError(f"label selector: {self.key!r} {self.operator} takes no values")

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == IN:
            return value is not None and value in self.values
        if self.operator == NOT_IN:
            return value is None or value not in self.values
        return (value is not None) == (self.operator == EXISTS)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All requirements must hold; none (an empty selector) matches every label set."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


EVERYTHING = LabelSelector()


def selector(
    match_labels: Mapping[str, str] | None = None,
    match_expressions: Iterable[tuple[str, str, Iterable[str]]] = (),
) -> LabelSelector:
    """The selector of ``matchLabels`` and ``matchExpressions`` (``(key, operator, values)`` each); raises
    :class:`SelectorError` for an expression the API server would refuse."""
    pairs = [Requirement(key, IN, frozenset({value})) for key, value in (match_labels or {}).items()]
    expressions = [Requirement(key, operator, frozenset(values)) for key, operator, values in match_expressions]
    return LabelSelector(tuple(pairs + expressions))
