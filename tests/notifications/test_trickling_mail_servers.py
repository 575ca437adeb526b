"""A mail server that trickles an answer (a byte every tenth of a second, each read well within EMAIL_TIMEOUT)
holds a worker no longer than the e-mail's deadline for the whole session (EMAIL_DEADLINE), and the send is
recorded by how far it got, as at the worker's time limit: one given up on before the message went out is
retried with backoff, one whose confirmation trickled is not sent again, one confirmed is sent."""

from __future__ import annotations

import queue
import socketserver
import threading
import time

import pytest

from jobs.models import JobEvent
from notifications import tasks
from notifications.models import Delivery

pytestmark = pytest.mark.django_db

# Each answer takes 8 s a byte at a time, where the deadlines below give up within 1.5 s.
TRICKLED = {
    "greeting": b"220 " + b"." * 76 + b"\r\n",
    "confirmation": b"250 " + b"." * 76 + b"\r\n",
    "bye": b"221 " + b"." * 76 + b"\r\n",
    # The start of a TLS handshake record of 16 kB, then the rest of 75 bytes a byte at a time.
    "handshake": b"\x16\x03\x03\x40\x00" + b"\x02" * 75,
}


class TricklingMailServer:
    """Just enough SMTP to take a message, trickling one answer a byte every `every` seconds: `at` names which
    (the greeting, the confirmation of a message, the answer to QUIT, or the TLS handshake after STARTTLS, of
    which it sends only the start of a record). Once a trickled answer is over it goes on as a mail server
    would. `messages` holds each message it took whole; `written()`, how many bytes of the trickled answer the
    next connection took before its client hung up (all of them when the client waited to the end)."""

    def __init__(self, at: str, *, every: float = 0.1):
        self.messages: list[str] = []
        self._written: queue.Queue[int] = queue.Queue()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: bytes) -> None:
                self.wfile.write(line + b"\r\n")

            def trickle(self) -> bool:
                """Writes the trickled answer; returns whether the client waited for all of it."""
                written = 0
                for byte in TRICKLED[at]:
                    try:
                        self.request.sendall(bytes([byte]))
                    except OSError:  # the client hung up
                        break
                    written += 1
                    time.sleep(every)
                server._written.put(written)
                return written == len(TRICKLED[at])

            def handle(self):
                if at == "greeting":
                    if not self.trickle():
                        return
                else:
                    self.reply(b"220 trickler ESMTP")
                while line := self.rfile.readline():
                    verb = line[:4].upper()
                    if verb == b"EHLO":
                        self.reply(b"250-trickler\r\n250 STARTTLS" if at == "handshake" else b"250 trickler")
                    elif verb == b"STAR":
                        self.reply(b"220 Ready to start TLS")
                        self.request.recv(65536)  # the client's hello, never answered but by the trickle
                        self.trickle()
                        return
                    elif verb == b"DATA":
                        self.reply(b"354 End data with <CR><LF>.<CR><LF>")
                        body = []
                        while (data := self.rfile.readline()) not in (b".\r\n", b""):
                            body.append(data.decode(errors="replace"))
                        server.messages.append("".join(body))
                        if at != "confirmation":
                            self.reply(b"250 OK")
                        elif not self.trickle():
                            return
                    elif verb == b"QUIT":
                        if at != "bye":
                            self.reply(b"221 Bye")
                        else:
                            self.trickle()
                        return
                    else:
                        self.reply(b"250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def written(self) -> int:
        return self._written.get(timeout=60)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mail_server(settings):
    """Returns a function starting a TricklingMailServer on 127.0.0.1 that e-mail is sent through."""
    made = []

    def _mail_server(at: str) -> TricklingMailServer:
        made.append(TricklingMailServer(at))
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", made[-1].port
        settings.EMAIL_USE_TLS = at == "handshake"
        settings.DEFAULT_FROM_EMAIL = "gangway@example.com"
        return made[-1]

    yield _mail_server
    for server in made:
        server.stop()


def failed(job) -> None:
    """Records that the job failed and works out its notifications (eagerly: they are sent at once)."""
    tasks.notify(JobEvent.objects.create(job=job, kind=JobEvent.Kind.FAILED, message="Failed: boom").pk)


def test_a_mail_server_trickling_its_greeting_is_given_up_on_at_the_deadline_and_retried_with_backoff(
        submit, mailed_owner, mail_server, settings, retries_held):  # fmt: skip
    settings.EMAIL_DEADLINE = 0.5
    server = mail_server("greeting")
    failed(submit())

    assert server.written() < len(TRICKLED["greeting"])  # the worker hung up long before the greeting's end
    assert server.messages == []
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == "Could not hand the e-mail to the mail server within 0.5 s; it did not go out."
    (wait,) = retries_held
    assert 24 <= wait <= 36  # the first step of the backoff


def test_a_mail_server_trickling_its_tls_handshake_is_given_up_on_at_the_deadline_and_retried(
        submit, mailed_owner, mail_server, settings, retries_held):  # fmt: skip
    settings.EMAIL_DEADLINE = 1.5
    server = mail_server("handshake")
    failed(submit())

    assert server.written() < len(TRICKLED["handshake"])
    assert server.messages == []
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("retrying", 1)
    assert delivery.error == "Could not hand the e-mail to the mail server within 1.5 s; it did not go out."
    assert len(retries_held) == 1


def test_a_mail_server_trickling_its_confirmation_is_given_up_on_at_the_deadline_and_not_sent_again(
        submit, mailed_owner, mail_server, settings):  # fmt: skip
    settings.EMAIL_DEADLINE = 1.5
    server = mail_server("confirmation")
    failed(submit())

    assert server.written() < len(TRICKLED["confirmation"])
    assert len(server.messages) == 1  # it has the message whole: sent again, it would arrive twice
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 1)
    assert delivery.error == ("The mail server did not confirm the e-mail within 1.5 s; it may well have received "
                              "it, so it is not sent again.")  # fmt: skip


def test_a_mail_server_that_confirmed_but_trickles_its_goodbye_is_left_at_the_deadline_and_the_email_is_sent(
        submit, mailed_owner, mail_server, settings):  # fmt: skip
    settings.EMAIL_DEADLINE = 1.5
    server = mail_server("bye")
    failed(submit())

    assert server.written() < len(TRICKLED["bye"])
    assert len(server.messages) == 1
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("sent", 1, "")


def test_a_mail_server_trickling_its_greeting_for_good_fails_after_the_retries(submit, mailed_owner, mail_server,
                                                                                settings, retries):  # fmt: skip
    settings.EMAIL_DEADLINE = 0.3
    server = mail_server("greeting")
    failed(submit())

    tries = tasks.MAX_RETRIES + 1
    assert [server.written() < len(TRICKLED["greeting"]) for _ in range(tries)] == [True] * tries
    assert all(later > sooner for sooner, later in zip(retries, retries[1:], strict=False))  # backed off
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("failed", tries)
    assert server.messages == []
