"""A loopback HTTP server for the web tools' tests: routes are functions of the request, all recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Request:
    """What a route sees, and what the test reads back afterwards."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    """A route's reply; ``chunks`` are written one by one (``delay`` seconds apart) without a length."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None
    delay: float = 0.0


Route = Callable[[Request], Answer]


class WebServer:
    """``ThreadingHTTPServer`` on 127.0.0.1 with a free port; ``routes`` maps a path to a route."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def start(self) -> WebServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


def _handler_for(server: WebServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            request = Request(
                self.command, parts.path, parts.query, dict(self.headers.items()), self.rfile.read(length)
            )
            server.requests.append(request)
            route = server.routes.get(parts.path)
            answer = route(request) if route else Answer(404, b"not found")
            if answer.delay and server.stopping.wait(answer.delay):
                return
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if answer.chunks is None:
                self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            try:
                if answer.chunks is None:
                    self.wfile.write(answer.body)
                for chunk in answer.chunks or []:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            if answer.chunks is not None:
                self.close_connection = True

        do_GET = do_POST = _serve

    return Handler
