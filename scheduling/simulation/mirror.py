"""Per-node free capacity mirrored into numpy arrays, for the two decisions packing makes outside the engine.

``ClusterState`` keeps its free capacity in Python lists behind private names; a question such as
"which nodes could host one member of this shape" costs a pass over the fleet in Python there. The
mirror answers it with a few vector operations, and is refreshed for the nodes each commit touches,
through the engine's public views (``free_vector``, ``node``), so it never diverges from the engine.

Used by ``cpu_only.py`` (CPU-only pods, which the engine refuses) and ``fast_random.py`` (a prototype of
an engine fast path for the ``random`` policy, see there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MILLI_PER_GPU, Request

UNLIMITED = np.iinfo(np.int64).max
"""Free CPU / memory of a node that does not track it: such a node never runs out."""


class FleetMirror:
    """Free CPU, memory, GPU milli (total, whole GPUs, largest share) per node, in the engine's node order."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        nodes = state.nodes()
        self.names = [node.name for node in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.cpu_tracked = [bool(node.cpu_milli_total) for node in nodes]
        self.mem_tracked = [bool(node.memory_mib_total) for node in nodes]
        self.cpu = np.array([n.cpu_milli_free if n.cpu_milli_total else UNLIMITED for n in nodes], dtype=np.int64)
        self.mem = np.array([n.memory_mib_free if n.memory_mib_total else UNLIMITED for n in nodes], dtype=np.int64)
        free = [n.free_milli() for n in nodes]
        self.gpu = np.array([sum(f) for f in free], dtype=np.int64)
        self.whole = np.array([sum(1 for m in f if m >= MILLI_PER_GPU) for f in free], dtype=np.int64)
        self.largest = np.array([max(f, default=0) for f in free], dtype=np.int64)
        self.ok = np.array([n.schedulable for n in nodes], dtype=bool)
        models = sorted({node.gpu_model for node in nodes})
        self.model_ids = {model: i for i, model in enumerate(models)}
        self.model = np.array([self.model_ids[node.gpu_model] for node in nodes], dtype=np.int64)
        self._model_masks: dict[frozenset[str], np.ndarray] = {}

    def refresh(self, names: Sequence[str]) -> None:
        """Re-read the nodes a commit or release touched."""
        for name in names:
            i = self.index[name]
            node = self.state.node(name)
            if self.cpu_tracked[i]:
                self.cpu[i] = node.cpu_milli_free
            if self.mem_tracked[i]:
                self.mem[i] = node.memory_mib_free
            free = node.free_milli()
            self.gpu[i] = sum(free)
            self.whole[i] = sum(1 for m in free if m >= MILLI_PER_GPU)
            self.largest[i] = max(free, default=0)

    def model_mask(self, models: frozenset[str]) -> np.ndarray:
        """Schedulable nodes of an allowed model (any model when ``models`` is empty)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if models:
                wanted = [self.model_ids[m] for m in models if m in self.model_ids]
                mask = self.ok & np.isin(self.model, wanted)
            else:
                mask = self.ok.copy()
            self._model_masks[models] = mask
        return mask

    def host_mask(self, request: Request) -> np.ndarray:
        """Nodes with the CPU and memory one member of ``request`` asks for."""
        return (self.cpu >= request.cpu_milli) & (self.mem >= request.memory_mib)
