"""A local SMTP sink and a local webhook receiver, both on loopback and started by the test; tasks run eagerly."""

from __future__ import annotations

import json
import queue
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifications import outbound, tasks
from portal.celery import app


class SmtpSink:
    """Just enough SMTP to take messages: every one received, as (recipients, raw message)."""

    def __init__(self):
        self.messages: list[tuple[list[str], str]] = []
        self.sender_answer = "250 OK"  # what MAIL FROM is answered: a 5xx refuses every message
        self.confirm_after = 0.0  # seconds it takes to confirm a message it has received (scanning it, say)
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self):
                self.reply("220 sink ESMTP")
                recipients: list[str] = []
                while line := self.rfile.readline().decode(errors="replace"):
                    verb = line[:4].upper()
                    if verb in ("EHLO", "HELO"):
                        self.reply("250 sink")
                    elif verb == "MAIL":
                        recipients = []
                        self.reply(sink.sender_answer)
                    elif verb == "RCPT":
                        recipients.append(line.split(":", 1)[1].strip().strip("<>"))
                        self.reply("250 OK")
                    elif verb == "DATA":
                        self.reply("354 End data with <CR><LF>.<CR><LF>")
                        body = []
                        while (data := self.rfile.readline().decode(errors="replace")) not in (".\r\n", ""):
                            body.append(data)
                        sink.messages.append((recipients, "".join(body)))
                        time.sleep(sink.confirm_after)
                        self.reply("250 OK")
                    elif verb == "QUIT":
                        self.reply("221 Bye")
                        return
                    else:
                        self.reply("250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class WebhookReceiver:
    """Records every JSON body posted; answers the statuses queued with `answer`, then 200."""

    def __init__(self):
        self.posts: list[dict] = []
        self.statuses: queue.Queue[int] = queue.Queue()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append(json.loads(body))
                code = 200 if receiver.statuses.empty() else receiver.statuses.get()
                if isinstance(code, float):  # slow: answers 200 after that many seconds
                    time.sleep(code)
                    code = 200
                if isinstance(code, bytes):  # not HTTP at all
                    self.wfile.write(code)
                    self.close_connection = True
                    return
                code, after = code if isinstance(code, tuple) else (code, None)
                self.send_response(code)
                if after is not None:
                    self.send_header("Retry-After", str(after))
                if 300 <= code < 400:
                    self.send_header("Location", "/elsewhere")  # a follower would GET it: 501 here
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/maps"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, *codes) -> None:
        """Queues answers: a status, (status, Retry-After seconds), a float (200 after that many seconds)
        or bytes (written as they are, not HTTP)."""
        for code in codes:
            self.statuses.put(code)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def smtp(settings):
    sink = SmtpSink()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", sink.port, False
    settings.DEFAULT_FROM_EMAIL = "gangway@example.com"
    yield sink
    sink.stop()


@pytest.fixture
def receiver(settings):
    hook = WebhookReceiver()
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_ALLOW_PRIVATE = True  # it listens on 127.0.0.1
    yield hook
    hook.stop()


@pytest.fixture(autouse=True)
def public_example_hosts(monkeypatch):
    """*.example.com resolves to a public address here, without DNS; other names as the machine resolves them."""
    resolve = outbound.addresses
    monkeypatch.setattr(outbound, "addresses", lambda host, port: ["93.184.215.14"] if host.endswith(
        "example.com") else resolve(host, port))  # fmt: skip


@pytest.fixture(autouse=True)
def eager_tasks(settings):
    """Tasks run in the caller (retries too, at once): the behaviour under test is the tasks', not the broker's."""
    settings.PUBLIC_URL = "https://gangway.example.com"
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def retries(monkeypatch) -> list[float]:
    """The countdown of each retry `deliver` asks for, in order (eager: each retry runs at once)."""
    waits = []
    retry = tasks.deliver.retry

    def noting(*args, countdown=None, **kwargs):
        waits.append(countdown)
        return retry(*args, countdown=countdown, **kwargs)

    monkeypatch.setattr(tasks.deliver, "retry", noting)
    return waits
