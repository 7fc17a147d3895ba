"""The charts' JSON data blocks: what static/js/charts.js parses with JSON.parse and hands to plotly.js."""

import json
import math
from datetime import UTC, date, datetime

import numpy as np
import pytest

from scheduling.charts import json_for_html


def strict(text: str) -> object:
    """JSON.parse's rules: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))


def test_times_are_iso_strings_of_the_same_instant():
    at = datetime(2026, 12, 5, 10, 30, tzinfo=UTC)
    x = strict(json_for_html({"x": [at, date(2026, 12, 5)]}))["x"]
    assert datetime.fromisoformat(x[0]) == at
    assert x[1] == "2026-12-05"


def test_numpy_numbers_are_numbers_and_nan_is_null():
    y = strict(json_for_html([np.float64(1.5), np.int64(3), math.nan, np.float64("nan")]))
    assert y == [1.5, 3, None, None]


def test_nothing_in_the_data_can_close_the_script_element():
    hostile = "</script><!--<script>&amp;"
    text = json_for_html({"name": hostile})
    assert "<" not in text and ">" not in text and "&" not in text
    assert strict(text) == {"name": hostile}


def test_a_value_that_is_not_chart_data_is_refused_by_type():
    with pytest.raises(TypeError, match="cannot chart object"):
        json_for_html({"x": [object()]})
