"""The Prometheus collector's HTTP side without a server: chunking, auth, and every way an answer fails."""

import json
from urllib.parse import parse_qs

import httpx
import numpy as np
import pytest

from scheduling.collectors import CircuitBreaker, MalformedResponse, SourceUnavailable
from scheduling.collectors.prometheus import PrometheusCollector, auth_headers, chunk_bounds
from scheduling.collectors.reliability import NO_RETRY

SERIES = [{"Hostname": "n1", "gpu": str(g), "UUID": f"GPU-{g}", "modelName": "H100"} for g in range(3)]


def prometheus(requests: list, status: int = 200, body: bytes | None = None):
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if body is not None:
            return httpx.Response(status, content=body)
        params = {k: v[0] for k, v in parse_qs(request.url.query.decode()).items()}
        if request.url.path.endswith("/query"):
            result = [{"metric": {}, "value": [float(params["time"]), str(len(SERIES))]}]
            return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": result}})
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        stamps = np.arange(start, end + step / 2, step)
        result = [
            {"metric": labels, "values": [[t, str(10 * (i + 1))] for t in stamps]} for i, labels in enumerate(SERIES)
        ]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": result}})

    return httpx.MockTransport(handle)


def collector(transport, **kwargs):
    return PrometheusCollector("http://prom.test", transport=transport, retry=NO_RETRY, **kwargs)


def test_it_cuts_the_range_so_no_answer_holds_more_than_the_point_budget():
    requests = []
    with collector(prometheus(requests), max_points=30) as c:
        window = c.gpu_window(1000.0, 25, 15.0)
    ranges = [r for r in requests if r.url.path.endswith("query_range")]
    assert len(ranges) == 3  # 3 series x 10 points per answer
    assert window.samples == 75 and window.requests == 4
    assert np.allclose(sorted(s.values.mean() for s in window.series), [0.1, 0.2, 0.3])


def test_chunks_cover_the_grid_exactly_once():
    chunks = chunk_bounds(0.0, 25, 15.0, series=3, max_points=30)
    assert chunks == [(0.0, 10), (150.0, 10), (300.0, 5)]


def test_it_sends_bearer_tokens_or_basic_credentials_from_the_secret():
    assert auth_headers("tok") == {"Authorization": "Bearer tok"}
    assert auth_headers("u:p", "basic") == {"Authorization": "Basic dTpw"}
    requests = []
    with collector(prometheus(requests), headers=auth_headers("tok")) as c:
        c.gpu_window(0.0, 2, 15.0)
    assert all(r.headers["Authorization"] == "Bearer tok" for r in requests)


def test_a_server_error_is_a_source_unavailable_and_counts_on_the_breaker():
    breaker = CircuitBreaker(failure_threshold=1)
    with collector(prometheus([], status=503, body=b"down"), breaker=breaker) as c, pytest.raises(SourceUnavailable):
        c.gpu_window(0.0, 2, 15.0)
    assert breaker.status == "open"


def test_a_query_error_answer_is_not_retried():
    body = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode()
    with collector(prometheus([], status=400, body=body)) as c, pytest.raises(SourceUnavailable) as caught:
        c.gpu_window(0.0, 2, 15.0)
    assert not caught.value.retryable


def test_a_truncated_answer_is_refused_whole():
    truncated = prometheus([], body=b'{"status":"success","data":{"result":[')
    with collector(truncated) as c, pytest.raises(MalformedResponse):
        c.gpu_window(0.0, 2, 15.0)


def test_it_refuses_a_metric_it_cannot_read_as_busy_time():
    with pytest.raises(ValueError):
        PrometheusCollector("http://prom.test", metric="DCGM_FI_DEV_FB_USED")
