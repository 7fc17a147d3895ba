from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.traces.registry import shared_traces_dir
from tests.support import require

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Public traces live next to the checkout, never inside it (openb is research-or-study only); a worktree
# elsewhere points at them with $GPUPORTAL_TRACES_DIR, as the simulator does.
TRACES = shared_traces_dir()


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def shared_traces() -> Path:
    require(TRACES.is_dir(), f"public traces not present at {TRACES} (see ../shared/traces/README.md)")
    return TRACES
