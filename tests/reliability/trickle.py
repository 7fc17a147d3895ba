"""A real local HTTP server that answers one byte at a time (issue 36's slow orchestrator).

``mode="body"`` sends whole headers, then a JSON body a byte every ``interval`` s; ``mode="headers"`` trickles
the status line and headers themselves. Each connection stops by itself after ``lasts`` seconds or when the
client hangs up, so a test never leaves it running.
"""

from __future__ import annotations

import socket
import socketserver
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.fleet_servers import serving

BODY = b'{"nodes": [], "jobs": []}' + b" " * 4000


def _answer(mode: str) -> tuple[bytes, bytes]:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)
    return (b"", head + BODY) if mode == "headers" else (head, BODY)


@contextmanager
def trickling_server(*, mode: str = "body", interval: float = 0.2, lasts: float = 20.0) -> Iterator[str]:
    at_once, slowly = _answer(mode)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.settimeout(2)
            try:
                conn.recv(65536)  # the request; its content does not matter
                conn.sendall(at_once)
                stop = time.monotonic() + lasts
                for byte in slowly:
                    if time.monotonic() > stop:
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(interval)
            except OSError:  # the client hung up: the deadline worked
                return

    with serving(socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)) as url:
        yield url
