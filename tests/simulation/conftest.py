from __future__ import annotations

import pytest


@pytest.fixture
def call_command():  # type: ignore[no-untyped-def]
    """Django's ``call_command``; skipped when Django settings are not configured (e.g. ``-p no:django``)."""
    django = pytest.importorskip("django")
    from django.conf import settings

    if not settings.configured:
        pytest.skip("Django settings not configured (run without -p no:django to include this test)")
    django.setup()
    from django.core.management import call_command as call

    return call
