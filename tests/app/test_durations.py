"""Waits read as people read them: "11 h 25 min", not "41101 s"."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.templatetags.durations import UNITS, duration


@pytest.mark.parametrize(
    "seconds, text",
    [
        (41101, "11 h 25 min"),
        (0, "0 s"),
        (0.4, "0 s"),
        (42, "42 s"),
        (200, "3 min 20 s"),
        (3600, "1 h"),
        (7199.6, "2 h"),
        (86_399, "1 d"),
        (3 * 86_400 + 5 * 3600 + 59, "3 d 5 h"),
        ("90", "1 min 30 s"),
        (None, "—"),
        ("", "—"),
        (-5, "—"),
        (float("nan"), "—"),
    ],
)
def test_a_duration_reads_in_its_two_largest_units(seconds, text):
    assert duration(seconds) == text


@given(st.floats(min_value=0, max_value=10**9))
def test_a_duration_is_within_half_a_unit_below_its_first_and_never_shows_a_full_unit_as_the_second(seconds):
    sizes = dict(UNITS)
    words = duration(seconds).split()
    shown = sum(int(words[i]) * sizes[words[i + 1]] for i in range(0, len(words), 2))
    names = [name for name, _size in UNITS]
    below = UNITS[min(names.index(words[1]) + 1, len(UNITS) - 1)][1]  # the unit under the first one shown
    assert len(words) in (2, 4) and abs(shown - seconds) <= below / 2
    if len(words) == 4:
        assert int(words[2]) * sizes[words[3]] < sizes[words[1]]  # never "1 h 60 min"
