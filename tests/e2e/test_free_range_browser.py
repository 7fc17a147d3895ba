"""A free from/to window typed in Chromium beside the presets; an impossible one is a 400 naming the field."""

from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.browser


def test_alice_picks_a_free_window_and_a_reversed_one_is_refused(session, federation):
    alice = session(width=1440)
    alice.log_in("alice", "alice")
    page = alice.go("/utilisation/")
    until = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    page.locator("#range-custom summary").click()  # the from–to form is folded until asked for (issue 33 item 10)
    page.locator("#range-from").fill(f"{until - timedelta(hours=3):%Y-%m-%dT%H:%M}")
    page.locator("#range-to").fill(f"{until:%Y-%m-%dT%H:%M}")
    page.locator("#range-free").click()
    page.wait_for_load_state()
    assert page.locator("#custom-window").inner_text() == (
        f"{until - timedelta(hours=3):%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC"
    )
    page.locator("#range-from").fill(f"{until + timedelta(hours=1):%Y-%m-%dT%H:%M}")
    page.locator("#range-free").click()
    page.wait_for_load_state()
    assert "from must be before to" in page.locator("main").inner_text()
