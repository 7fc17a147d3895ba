"""Browser tests: Debian's headless chromium driven by Playwright against pytest-django's live server
(the browser and session fixtures are tests/browser.py's, registered in tests/conftest.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.fixture
def federation(transactional_db):
    from scheduling.services import demo

    demo.create_demo_federation()
    demo.fill_history(days=0.2, step_s=600)
    return timezone.now() + timedelta(days=1)
