"""Trace-driven discrete-event simulator (packing and replay modes) on top of the pure engine.

Pure: imports only the engine, the trace readers and numpy; no Django, no clock except the run's own
wall time; progress through an optional callback.
"""

from scheduling.simulation.packing import FGD_SEEDS, PackingResult, run_packing
from scheduling.simulation.results import ReplayResult
from scheduling.simulation.runner import MODES, POLICY_NAMES, simulate_packing, simulate_replay

__all__ = [
    "FGD_SEEDS",
    "MODES",
    "POLICY_NAMES",
    "PackingResult",
    "ReplayResult",
    "run_packing",
    "simulate_packing",
    "simulate_replay",
]
