"""A real HTTP server in a thread that records what chat webhooks receive (no stub transport: httpx really
connects, times out and reads status codes)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatRoom:
    def __init__(self) -> None:
        self.received: list[dict] = []
        self.paths: list[str] = []
        self.answers: list[int] = []  # status per request in order; the last one repeats
        self.delay_s = 0.0
        room = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                room.received.append(body)
                room.paths.append(self.path)
                status = room.answers[min(len(room.received), len(room.answers)) - 1] if room.answers else 200
                time.sleep(room.delay_s)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 400 else b"invalid_token")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook/T000/B000/secret-token") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
