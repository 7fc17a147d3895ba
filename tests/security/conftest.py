"""Shared pieces of the security tests: a server that repeats the credentials it was sent."""

import http.server
import threading

import pytest

from tests.api.conftest import stored_report  # noqa: F401 - a stored weekly report with empty sections
from tests.rebalance.conftest import federation, inference_floor  # noqa: F401 - the rebalancer's small federation


class EchoCredentials(http.server.BaseHTTPRequestHandler):
    """Answers 401 and quotes the token it received, as a careless orchestrator's error page might."""

    received: list[str]

    def do_GET(self):
        token = self.headers.get("X-SLURM-USER-TOKEN") or self.headers.get("Authorization") or ""
        self.received.append(token)
        body = f"invalid token {token!r}".encode()
        self.send_response(401)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echo_server():
    """(URL, the tokens received so far) of a real HTTP server on a free port."""
    received: list[str] = []
    handler = type("Handler", (EchoCredentials,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


@pytest.fixture
def credentials_dir(tmp_path, settings):
    """A credentials directory the portal trusts, and nothing else."""
    trusted = tmp_path / "credentials"
    trusted.mkdir()
    settings.GPUPORTAL_CREDENTIALS_DIRS = [str(trusted)]
    return trusted
