"""GET a JSON document over httpx with timeouts and retries, mapping every failure to a
:class:`CollectorError` so collectors never leak httpx exceptions."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from .deadline import DEFAULT_DEADLINE_S, deadline_transport, total_deadline
from .errors import MalformedResponse, SourceUnavailable
from .reliability import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, RetryPolicy, with_retries


class JsonClient:
    """A thin, reusable wrapper around ``httpx.Client`` for one orchestrator endpoint.

    ``transport`` lets tests plug in respx (error paths) and lets deployments add TLS/proxy setup.
    ``deadline`` bounds a whole call, retries and their waits included (collectors/deadline.py): ``timeout``
    alone bounds each socket read, which a server trickling bytes renews forever.
    """

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        deadline: float | None = None,
    ) -> None:
        self.name = name
        self.retry = retry
        self.sleep = sleep
        # A call may take a few of its reads' timeouts (an actuator's 30 s one included), never more.
        self.deadline = deadline if deadline is not None else max(DEFAULT_DEADLINE_S, 2 * timeout)
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout),
            transport=transport if transport is not None else deadline_transport(),
        )

    def close(self) -> None:
        self._client.close()

    def get_json(self, path: str, params: Mapping[str, Any] | list[tuple[str, str]] | None = None) -> Any:
        with total_deadline(self.deadline):
            return with_retries(lambda: self._get_once(path, params), self.retry, self.sleep)

    def get_body(self, path: str, params: Mapping[str, Any] | None = None) -> bytes:
        """The body of a successful GET, undecoded (for a caller decoding only the fields it reads)."""
        with total_deadline(self.deadline):
            return with_retries(lambda: self._get_body_once(path, params), self.retry, self.sleep)

    def _get_body_once(self, path: str, params: Any) -> bytes:
        response = self.request("GET", path, params=params)
        check_status(self.name, response)
        return response.content

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request with transport errors mapped; status handling is the caller's (actuators)."""
        try:
            with total_deadline(self.deadline):
                return self._client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise SourceUnavailable(f"{self.name}: {method} {path} timed out ({exc})") from exc
        except httpx.HTTPError as exc:
            raise SourceUnavailable(f"{self.name}: {method} {path} failed: {exc}") from exc

    def _get_once(self, path: str, params: Any) -> Any:
        response = self.request("GET", path, params=params)
        check_status(self.name, response)
        return decode_json(self.name, response)


def check_status(name: str, response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    where = f"{name}: {response.request.method} {response.request.url.path}"
    # 5xx and 429 are the server's momentary trouble; 4xx (401 bad token, 404, 405 verb not supported)
    # will answer the same on a retry.
    retryable = status >= 500 or status == 429
    raise SourceUnavailable(f"{where} -> HTTP {status}: {response.text[:200]}", retryable=retryable, status=status)


def decode_json(name: str, response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MalformedResponse(
            f"{name}: {response.request.url.path} is not whole JSON ({exc}; {len(response.content)} bytes)"
        ) from exc


def require(document: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``document[key]`` if it exists with the expected type, else :class:`MalformedResponse`."""
    if not isinstance(document, dict) or key not in document:
        raise MalformedResponse(f"{where}: missing key {key!r}")
    value = document[key]
    if not isinstance(value, kind):
        raise MalformedResponse(f"{where}: {key!r} is {type(value).__name__}, expected {kind}")
    return value
