"""A local HTTP server that answers like Gangway's API as a test scripts it, for what the live server
cannot be made to do on cue: time out, answer 429 with Retry-After or 502/503 from a proxy, drop
the connection, cut an answer short (`CUT`, or after some bytes of a body: `cut_after`), redirect.

Each (method, path) has answers given in turn, the last one repeated (an answer may be a function of
the request); every request is recorded with its headers, query and body.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: object = None  # JSON, or bytes sent as they are
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering: longer than the client's timeout is a timeout
    cut_after: int | None = None  # bytes of the body sent before the connection closes (its length says all)


DROP = "drop"  # close the connection without answering
CUT = "cut"  # send headers promising more than the body that follows, then close


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes


def job(job_id: int = 7, state: str = "queued", **fields) -> dict:
    """A job as the API shows it, with what the CLI reads."""
    return {"id": job_id, "name": f"job-{job_id}", "team": "maps", "tier": "standard", "gpu_total": 2,
            "state": state, "position": None, "team_position": None, "eta": None, "reason": "",
            "url": f"http://127.0.0.1/api/v1/jobs/{job_id}/", "web_url": f"http://127.0.0.1/jobs/{job_id}/",
            "unsupported": [], **fields}  # fmt: skip


class FakePortal:
    def __init__(self):
        self.routes: dict[tuple[str, str], list] = {}
        self.requests: list[Request] = []
        self.stop = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def on(self, method: str, path: str, *answers) -> None:
        self.routes[(method, path)] = list(answers)

    def to(self, path: str) -> list[Request]:
        return [request for request in self.requests if request.path == path]

    def start(self) -> FakePortal:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()  # delayed answers stop waiting
        self.server.shutdown()
        self.server.server_close()

    def _next(self, method: str, path: str):
        answers = self.routes.get((method, path))
        if not answers:
            return Answer(404, {"detail": f"No route {method} {path} in the fake."})
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def _handler(self):
        portal = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer()

            def do_POST(self):
                self._answer()

            def _answer(self):
                url = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                query = dict(urllib.parse.parse_qsl(url.query))
                portal.requests.append(Request(self.command, url.path, query, dict(self.headers), body))
                answer = portal._next(self.command, url.path)
                answer = answer(portal.requests[-1]) if callable(answer) else answer
                self.close_connection = True
                if answer == DROP:
                    return
                if answer == CUT:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"id": 7, "na')
                    return
                if answer.delay and portal.stop.wait(answer.delay):
                    return
                raw = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    if "Content-Type" not in answer.headers:
                        self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw if answer.cut_after is None else raw[: answer.cut_after])
                except OSError:  # the client gave up waiting
                    pass

        return Handler
