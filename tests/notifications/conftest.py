"""A local SMTP sink, a local webhook receiver and a receiver that trickles, all on loopback and started by the
test; the worker's soft time limit brought as billiard brings it; tasks run eagerly."""

from __future__ import annotations

import json
import queue
import signal
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from celery.exceptions import Retry, SoftTimeLimitExceeded

from notifications import outbound, tasks
from notifications.models import Subscription
from portal import triggers
from portal.celery import app


class SmtpSink:
    """Just enough SMTP to take messages: every one received, as (recipients, raw message)."""

    def __init__(self):
        self.messages: list[tuple[list[str], str]] = []
        self.sender_answer = "250 OK"  # what MAIL FROM is answered: a 5xx refuses every message
        self.confirm_after = 0.0  # seconds it takes to confirm a message it has received (scanning it, say)
        # Called once, at the next connection before greeting it: a server slow to answer at all.
        self.before_greeting: Callable[[], None] | None = None
        # Called once, when the next message is in whole, which is then never confirmed (a server that stalls).
        self.instead_of_confirming: Callable[[], None] | None = None
        # Called once, at the next QUIT, which is then never answered.
        self.instead_of_bye: Callable[[], None] | None = None
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self):
                if hook := sink.take("before_greeting"):
                    hook()
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
                        if hook := sink.take("instead_of_confirming"):
                            hook()
                            continue
                        time.sleep(sink.confirm_after)
                        self.reply("250 OK")
                    elif verb == "QUIT":
                        if hook := sink.take("instead_of_bye"):
                            hook()
                            while self.rfile.readline():  # silent until the client hangs up
                                pass
                            return
                        self.reply("221 Bye")
                        return
                    else:
                        self.reply("250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def take(self, hook: str) -> Callable[[], None] | None:
        """The hook of that name, once: it is cleared."""
        taken = getattr(self, hook)
        setattr(self, hook, None)
        return taken

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Trickler:
    """A receiver that trickles: once it has what a client sends first (an HTTP request, or with `tls` a TLS
    client hello, to which it never answers a real handshake), it calls `on_read` (once, when set), then
    writes `answer` a byte every `every` seconds and hangs up; with no answer it stays silent until the
    client hangs up. `posts` holds the JSON body of each request; `written()`, how many bytes a connection
    took before its client hung up (all of them when the client waited to the end)."""

    def __init__(self, answer: bytes = b"", *, every: float = 0.1, tls: bool = False):
        self.answer, self.every = answer, every
        self.on_read: Callable[[], None] | None = None
        self.posts: list[dict] = []
        self._written: queue.Queue[int] = queue.Queue()
        trickler = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                if tls:
                    self.request.recv(65536)
                else:
                    length = 0
                    while (line := self.rfile.readline()) not in (b"\r\n", b""):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    trickler.posts.append(json.loads(self.rfile.read(length)))
                hook, trickler.on_read = trickler.on_read, None
                if hook:
                    hook()
                if not trickler.answer:
                    while self.request.recv(65536):  # silent until the client hangs up
                        pass
                written = 0
                for byte in trickler.answer:
                    try:
                        self.request.sendall(bytes([byte]))
                    except OSError:  # the client hung up
                        break
                    written += 1
                    time.sleep(trickler.every)
                trickler._written.put(written)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hooks/maps"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def written(self) -> int:
        """How many bytes of its answer the next connection took, once it is over (its client hung up, or
        the answer ended)."""
        return self._written.get(timeout=60)

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


@pytest.fixture
def soft_limit() -> Iterator[Callable[[], None]]:
    """Returns a function that brings the worker's soft time limit now, as billiard's pool brings it: SIGUSR1 to
    the thread running the task (here the test's), whose handler raises SoftTimeLimitExceeded wherever that
    thread is. A receiver's thread calls it at the moment of the exchange under test."""

    def raise_it(signum, frame):
        raise SoftTimeLimitExceeded()

    before = signal.signal(signal.SIGUSR1, raise_it)
    main = threading.main_thread().ident
    yield lambda: signal.pthread_kill(main, signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, before)


@pytest.fixture(autouse=True)
def public_example_hosts(monkeypatch):
    """*.example.com resolves to a public address here, without DNS; other names as the machine resolves them."""
    resolve = outbound.addresses
    monkeypatch.setattr(outbound, "addresses", lambda host, port: ["93.184.215.14"] if host.endswith(
        "example.com") else resolve(host, port))  # fmt: skip


@pytest.fixture(autouse=True)
def eager_tasks(settings, monkeypatch):
    """Tasks run in the caller (retries too, at once): the behaviour under test is the tasks', not the broker's.
    The admission cycles and reconciles that submissions ask for by name (`triggers.trigger`, Celery's
    send_task, which eager mode does not cover) are not sent: no test here runs them."""
    settings.PUBLIC_URL = "https://gangway.example.com"
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    monkeypatch.setattr(triggers, "trigger", lambda task_name: None)
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


@pytest.fixture
def trickler(settings):
    """Returns a function starting a Trickler on 127.0.0.1, which webhooks may then reach."""
    settings.WEBHOOK_ALLOW_PRIVATE = True
    made = []

    def _trickler(*args, **kwargs) -> Trickler:
        made.append(Trickler(*args, **kwargs))
        return made[-1]

    yield _trickler
    for receiver in made:
        receiver.stop()


@pytest.fixture
def retries_held(monkeypatch) -> list[float]:
    """A retry is asked for but not run: the countdown of each is listed."""
    waits = []

    def held(*args, countdown=None, **kwargs):
        waits.append(countdown)
        return Retry(when=countdown)

    monkeypatch.setattr(tasks.deliver, "retry", held)
    return waits


@pytest.fixture
def owner_with_address(owner):
    """The owner persona with an e-mail address, subscribed to nothing yet: the test says what they ask to hear."""
    owner.email = "owner@example.com"
    owner.save()
    return owner


@pytest.fixture
def mailed_owner(owner_with_address):
    """The owner with an e-mail address, subscribed to hear when their own jobs fail."""
    Subscription.objects.create(user=owner_with_address, team=None, on_fail=True)
    return owner_with_address
