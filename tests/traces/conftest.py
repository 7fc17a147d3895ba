from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Public traces live next to the checkout, never inside it (openb is research-or-study only).
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TRACES = SHARED / "traces"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def shared_traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"public traces not present at {TRACES} (see ../shared/traces/README.md)")
    return TRACES
