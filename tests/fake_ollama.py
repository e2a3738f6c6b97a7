"""A tiny real HTTP server speaking enough of Ollama's API to test the LLM path without Ollama.

It runs on 127.0.0.1 with an OS-chosen port in a background thread, so the client under test goes
through real sockets, real HTTP and real timeouts. Behaviour is scriptable per test and every request
is recorded. Use the `fake_ollama` fixture (import it into conftest.py or a test module).
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

CHAT_MODEL = "test-model"
EMBED_MODEL = "nomic-embed-text"
EMBED_DIM = 8


def fake_vector(text: str, dim: int = EMBED_DIM) -> list[float]:
    """Deterministic, deliberately unnormalised vector derived from a hash of `text`."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [(b - 127.5) / 12.75 for b in struct.unpack(f"{dim}B", digest[:dim])]


class FakeOllama:
    """Scriptable fake. Knobs (set them in a test):

    - `chat_responses`: deque of replies for /api/chat (dict -> JSON-encoded; str -> sent as-is), or set
      `chat_handler` to a callable(request_body) -> dict | str. Default reply: `{}`.
    - `invalid_json`: every chat reply's content is not JSON.
    - `fail_next(n, status=500)`: the next n requests (any endpoint) answer with that HTTP status.
    - `delay_seconds`: sleep before answering (to trigger client timeouts).
    - `models`: model names that exist; any other model gets Ollama's 404 "model not found".
    - `requests`: list of {"method", "path", "body"} received, in order.
    """

    def __init__(self) -> None:
        self.models: set[str] = {CHAT_MODEL, EMBED_MODEL}
        self.chat_responses: deque[dict | str] = deque()
        self.chat_handler: Callable[[dict], dict | str] | None = None
        self.invalid_json = False
        self.delay_seconds = 0.0
        self.embed_dim = EMBED_DIM
        self.requests: list[dict[str, Any]] = []
        self._failures: deque[int] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --

    def fail_next(self, times: int, status: int = 500) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def reply(self, *responses: dict | str) -> None:
        """Queue chat replies, used in order."""
        self.chat_responses.extend(responses)

    def bodies(self, path: str) -> list[dict]:
        """JSON bodies of the requests received on `path`."""
        return [r["body"] for r in self.requests if r["path"] == path]

    # -- lifecycle --

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeOllama:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-ollama", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- request handling (called from handler threads) --

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body})
            failure = self._failures.popleft() if self._failures else None
        if self.delay_seconds:
            self._stopping.wait(self.delay_seconds)
        if failure is not None:
            return failure, {"error": f"scripted failure {failure}"}
        if method == "GET" and path == "/api/tags":
            return 200, {"models": [{"name": m, "model": m, "size": 1} for m in sorted(self.models)]}
        if method != "POST" or path not in ("/api/chat", "/api/embed"):
            return 404, "404 page not found"
        if not isinstance(body, dict):
            return 400, {"error": "invalid request body"}
        model = body.get("model")
        if model not in self.models:
            return 404, {"error": f"model '{model}' not found, try pulling it first"}
        if path == "/api/embed":
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            return 200, {"model": model, "embeddings": [fake_vector(t, self.embed_dim) for t in inputs]}
        return 200, {
            "model": model,
            "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": self._chat_content(body)},
            "done": True,
            "done_reason": "stop",
        }

    def _chat_content(self, body: dict) -> str:
        if self.invalid_json:
            return "Sure! Here is the JSON you asked for: {entities: ["
        if self.chat_handler is not None:
            reply = self.chat_handler(body)
        else:
            with self._lock:
                reply = self.chat_responses.popleft() if self.chat_responses else {}
        return reply if isinstance(reply, str) else json.dumps(reply)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOllama
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes; avoid 40 ms delayed-ACK stalls

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        status, payload = self.owner.handle(method, self.path, body)
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        content_type = "text/plain" if isinstance(payload, str) else "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


@pytest.fixture
def fake_ollama():
    """A started `FakeOllama`; stopped after the test."""
    server = FakeOllama().start()
    try:
        yield server
    finally:
        server.stop()
