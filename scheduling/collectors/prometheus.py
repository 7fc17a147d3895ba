"""Prometheus collector: per-GPU DCGM utilisation over a time window -> :class:`DcgmWindow`.

Clusters export what GPUs *do* with NVIDIA's DCGM exporter (``DCGM_FI_DEV_GPU_UTIL`` in percent or
``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` as a ratio), labelled ``Hostname``, ``gpu``, ``UUID``, ``modelName`` and,
when the exporter maps jobs, ``namespace``/``pod`` (Kubernetes) or ``hpc_job`` (Slurm). Prometheus keeps
the history; we read it with ``/api/v1/query_range`` on a fixed step grid.

Responses are bounded: an instant ``count`` first says how many series the window holds, then the range
is cut into chunks of at most ``max_points`` points each (Prometheus refuses more than 11,000 points
per series anyway), so one answer never needs more than a few tens of MB to decode.

Values come back as fractions in [0, 1] on a dense grid (``NaN`` where Prometheus has no sample), as
numpy arrays, so attributing two million samples is array arithmetic rather than a Python loop.
Never imports Django.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from .errors import MalformedResponse, SourceUnavailable
from .httpjson import JsonClient, require
from .reliability import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, CircuitBreaker, RetryPolicy, guarded

# metric -> factor turning its value into a busy fraction
BUSY_METRICS = {"DCGM_FI_DEV_GPU_UTIL": 0.01, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 1.0}
DEFAULT_MAX_POINTS = 250_000
PROMETHEUS_MAX_POINTS_PER_SERIES = 11_000


@dataclass(frozen=True, slots=True)
class JobLabels:
    """Which job the exporter says holds the GPU (empty strings: it does not say)."""

    hpc_job: str = ""
    namespace: str = ""
    pod: str = ""

    @property
    def empty(self) -> bool:
        return not (self.hpc_job or self.pod)


@dataclass(frozen=True, slots=True, eq=False)
class GpuSeries:
    """One GPU's busy fraction on the window's grid (``values[i]`` stands for ``[start + i*step, +step)``)."""

    hostname: str
    gpu: int
    uuid: str
    model: str
    job: JobLabels
    values: np.ndarray = field(repr=False)


@dataclass(frozen=True, slots=True)
class DcgmWindow:
    """What Prometheus held for ``points`` steps of ``step`` seconds from ``start`` (epoch seconds)."""

    start: float
    step: float
    points: int
    metric: str
    series: tuple[GpuSeries, ...]
    requests: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def end(self) -> float:
        return self.start + self.points * self.step

    @property
    def samples(self) -> int:
        return int(sum(np.count_nonzero(~np.isnan(s.values)) for s in self.series))


def auth_headers(secret: str, scheme: str = "bearer") -> dict[str, str]:
    """``bearer``: the secret is a token; ``basic``: the secret is ``user:password``."""
    if not secret:
        return {}
    if scheme == "basic":
        return {"Authorization": "Basic " + base64.b64encode(secret.encode()).decode()}
    return {"Authorization": f"Bearer {secret}"}


def chunk_bounds(start: float, points: int, step: float, series: int, max_points: int) -> list[tuple[float, int]]:
    """(chunk start, chunk points) pieces so that ``series * chunk points`` stays under ``max_points``."""
    per_chunk = max(1, min(max_points // max(series, 1), PROMETHEUS_MAX_POINTS_PER_SERIES))
    return [(start + i * step, min(per_chunk, points - i)) for i in range(0, points, per_chunk)]


def prometheus_data(document: Any, where: str) -> Any:
    """``data.result`` of an API answer; ``status: error`` becomes a :class:`SourceUnavailable`."""
    if isinstance(document, dict) and document.get("status") == "error":
        raise SourceUnavailable(f"{where}: {document.get('errorType')}: {document.get('error')}", retryable=False)
    if not isinstance(document, dict) or document.get("status") != "success":
        raise MalformedResponse(f"{where}: not a Prometheus API answer")
    return require(require(document, "data", (dict,), where), "result", (list, str), where)


def series_key(labels: Mapping[str, str]) -> tuple[str, int, JobLabels]:
    """(host, GPU index, job): Prometheus renames the exporter's pod labels ``exported_*`` when its own
    service discovery already set ``namespace``/``pod`` (those then name the exporter, not the job)."""
    job = JobLabels(
        hpc_job=labels.get("hpc_job", ""),
        namespace=labels.get("exported_namespace") or labels.get("namespace", ""),
        pod=labels.get("exported_pod") or labels.get("pod", ""),
    )
    host = labels.get("Hostname") or labels.get("hostname") or labels.get("instance", "").split(":")[0]
    try:
        gpu = int(labels.get("gpu", ""))
    except ValueError as exc:
        raise MalformedResponse(f"DCGM series without a numeric 'gpu' label: {dict(labels)}") from exc
    return host, gpu, job


def fill_grid(grid: np.ndarray, values: list[list[Any]], start: float, step: float, scale: float) -> None:
    """Write ``[[ts, "value"], ...]`` into ``grid`` at the step index of each timestamp."""
    if not values:
        return
    first = round((float(values[0][0]) - start) / step)
    if round((float(values[-1][0]) - start) / step) - first == len(values) - 1 and first >= 0:
        # The usual case, a series without gaps: only its ends' timestamps need reading.
        numbers = np.array([v[1] for v in values], dtype=np.float64)[: grid.shape[0] - first] * scale
        grid[first : first + numbers.shape[0]] = np.clip(numbers, 0.0, 1.0)
        return
    pairs = np.asarray(values, dtype=object)
    stamps = pairs[:, 0].astype(np.float64)
    numbers = pairs[:, 1].astype(np.float64) * scale
    index = np.rint((stamps - start) / step).astype(np.int64)
    keep = (index >= 0) & (index < grid.shape[0])
    grid[index[keep]] = np.clip(numbers[keep], 0.0, 1.0)


class PrometheusCollector:
    """Reads one Prometheus (or Thanos/Mimir: same HTTP API) holding DCGM exporter metrics."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "prometheus",
        headers: Mapping[str, str] | None = None,
        metric: str = "DCGM_FI_DEV_GPU_UTIL",
        selector: str = "",
        max_points: int = DEFAULT_MAX_POINTS,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = DEFAULT_RETRY,
        breaker: CircuitBreaker | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if metric not in BUSY_METRICS:
            raise ValueError(f"metric must be one of {sorted(BUSY_METRICS)}, not {metric!r}")
        self.name, self.metric, self.max_points, self.breaker = name, metric, max_points, breaker
        # ``selector`` narrows the metric to this fleet, e.g. 'cluster="east"' (PromQL label matchers).
        self.expression = f"{metric}{{{selector}}}" if selector else metric
        self.client = JsonClient(
            base_url, name=name, headers=headers, timeout=timeout, retry=retry, transport=transport, sleep=sleep
        )

    def __enter__(self) -> PrometheusCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def close(self) -> None:
        self.client.close()

    def gpu_window(self, start: float, points: int, step: float) -> DcgmWindow:
        """Every GPU's busy fraction for ``points`` steps from ``start``, under the circuit breaker."""
        return guarded(self.breaker, self.name, lambda: self._gpu_window(start, points, step))

    def _gpu_window(self, start: float, points: int, step: float) -> DcgmWindow:
        end = start + points * step
        count = self.series_count(end, end - start + step)
        grids: dict[tuple[str, int, JobLabels], tuple[np.ndarray, Mapping[str, str]]] = {}
        warnings: list[str] = []
        chunks = chunk_bounds(start, points, step, count, self.max_points)
        for chunk_start, chunk_points in chunks:
            document = self.client.get_json(
                "/api/v1/query_range",
                {
                    "query": self.expression,
                    "start": _stamp(chunk_start),
                    "end": _stamp(chunk_start + (chunk_points - 1) * step),
                    "step": _stamp(step),
                },
            )
            result = prometheus_data(document, "query_range")
            warnings.extend(str(w) for w in document.get("warnings") or ())
            self._merge(grids, result, start, points, step)
        series = tuple(
            GpuSeries(key[0], key[1], labels.get("UUID", ""), labels.get("modelName", ""), key[2], grid)
            for key, (grid, labels) in grids.items()
        )
        return DcgmWindow(start, step, points, self.metric, series, requests=len(chunks) + 1, warnings=tuple(warnings))

    def series_count(self, at: float, lookback_s: float) -> int:
        """How many series the window holds, to size the chunks before asking for the values."""
        seconds = max(math.ceil(lookback_s), 1)
        document = self.client.get_json(
            "/api/v1/query", {"query": f"count(count_over_time({self.expression}[{seconds}s]))", "time": _stamp(at)}
        )
        result = prometheus_data(document, "query count")
        if not result:
            return 0
        try:
            return int(float(result[0]["value"][1]))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedResponse(f"query count: unexpected answer {result[:1]}") from exc

    def _merge(self, grids: dict, result: list[Any], start: float, points: int, step: float) -> None:
        scale = BUSY_METRICS[self.metric]
        for item in result:
            labels = require(item, "metric", (dict,), "query_range series")
            values = require(item, "values", (list,), "query_range series")
            key = series_key(labels)
            if key not in grids:
                grids[key] = (np.full(points, np.nan), labels)
            fill_grid(grids[key][0], values, start, step, scale)


def _stamp(epoch: float) -> str:
    """Prometheus accepts float seconds; fixed decimals keep the query string free of float noise."""
    return f"{epoch:.3f}"
