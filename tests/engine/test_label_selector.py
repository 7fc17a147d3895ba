"""Kubernetes LabelSelector semantics, as the API server evaluates a webhook's namespaceSelector/objectSelector."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.label_selector import EVERYTHING, LabelSelector, SelectorError, selector


def of(document: dict) -> LabelSelector:
    """A selector from its JSON/YAML form, as it stands in a webhook configuration."""
    expressions = [(e["key"], e["operator"], e.get("values", [])) for e in document.get("matchExpressions", [])]
    return selector(document.get("matchLabels"), expressions)


ADMISSION = {"gpuportal.io/admission": "disabled"}
TEAM = {"gpuportal.io/team": "nlp", "kubernetes.io/metadata.name": "nlp"}


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ["nlp", "vision"], TEAM, True),
        ("In", ["vision"], TEAM, False),
        ("In", ["nlp"], {}, False),  # absent key: In never holds
        ("NotIn", ["vision"], TEAM, True),
        ("NotIn", ["nlp"], TEAM, False),
        ("NotIn", ["nlp"], {}, True),  # absent key: NotIn holds
        ("Exists", [], TEAM, True),
        ("Exists", [], {"gpuportal.io/team": ""}, True),  # an empty value is still a value
        ("Exists", [], {}, False),
        ("DoesNotExist", [], TEAM, False),
        ("DoesNotExist", [], {}, True),  # absent key: DoesNotExist holds
    ],
)
def test_each_operator_on_present_and_absent_keys(operator, values, labels, expected):
    expression = {"key": "gpuportal.io/team", "operator": operator, "values": values}
    assert of({"matchExpressions": [expression]}).matches(labels) is expected


@pytest.mark.parametrize("document", [{}, {"matchLabels": {}}, {"matchLabels": {}, "matchExpressions": []}])
def test_an_empty_selector_matches_everything(document):
    assert of(document).matches({}) and of(document).matches(TEAM)
    assert of(document) == EVERYTHING == selector()


def test_match_labels_and_match_expressions_all_hold():
    document = {"matchLabels": {"gpuportal.io/team": "nlp"},
                "matchExpressions": [{"key": "gpuportal.io/admission", "operator": "NotIn", "values": ["disabled"]}]}
    assert of(document).matches(TEAM)
    assert not of(document).matches({**TEAM, **ADMISSION})  # the expression fails
    assert not of(document).matches(ADMISSION)  # the label is absent
    assert not of({"matchLabels": {"gpuportal.io/team": "nlp", "tier": "gold"}}).matches(TEAM)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ({"key": "k", "operator": "Matches", "values": ["v"]}, "'Matches' is not a valid operator"),
        ({"key": "k", "operator": "in", "values": ["v"]}, "'in' is not a valid operator"),  # case matters
        ({"key": "k", "operator": "Gt", "values": ["1"]}, "'Gt' is not a valid operator"),  # node selectors only
        ({"key": "k", "operator": "In", "values": []}, "'k' In needs values"),
        ({"key": "k", "operator": "NotIn"}, "'k' NotIn needs values"),
        ({"key": "k", "operator": "Exists", "values": ["v"]}, "'k' Exists takes no values"),
        ({"key": "k", "operator": "DoesNotExist", "values": ["v"]}, "'k' DoesNotExist takes no values"),
    ],
)
def test_a_selector_the_api_server_would_refuse_is_an_error_when_built(expression, message):
    with pytest.raises(SelectorError, match=message):
        of({"matchExpressions": [expression]})


KEYS = st.sampled_from(["a", "b", "gpuportal.io/team", "kubernetes.io/metadata.name"])
VALUES = st.sampled_from(["", "x", "y", "nlp"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)


@given(key=KEYS, value=VALUES, labels=LABELS)
def test_match_labels_is_an_in_expression_with_its_one_value(key, value, labels):
    as_label = of({"matchLabels": {key: value}})
    as_expression = of({"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]})
    assert as_label.matches(labels) == as_expression.matches(labels)


@given(key=KEYS, values=st.sets(VALUES, min_size=1), labels=LABELS, value=VALUES)
def test_not_in_is_the_complement_of_in_when_the_key_is_present(key, values, labels, value):
    labels = {**labels, key: value}
    in_ = of({"matchExpressions": [{"key": key, "operator": "In", "values": sorted(values)}]})
    not_in = of({"matchExpressions": [{"key": key, "operator": "NotIn", "values": sorted(values)}]})
    assert in_.matches(labels) != not_in.matches(labels)


@given(key=KEYS, labels=LABELS)
def test_does_not_exist_is_the_complement_of_exists(key, labels):
    exists = of({"matchExpressions": [{"key": key, "operator": "Exists"}]})
    absent = of({"matchExpressions": [{"key": key, "operator": "DoesNotExist"}]})
    assert exists.matches(labels) != absent.matches(labels)
    assert exists.matches(labels) == (key in labels)
