"""E-mail through Django's mail settings, telling a message whose confirmation was lost from one never sent.

A mail server takes a message whole (DATA, then the lines, then a lone ".") and only then answers
250; many scan it first. When that answer does not come in time (EMAIL_TIMEOUT) or the connection
drops before it, the server may well have the message, and sending it again would deliver it
twice, or six times over the retries. smtplib reports both as SMTPServerDisconnected, wherever
they happen: the client here notes when the message's end has gone out, so that the caller can
tell "the server may have it" (`AnswerLost`) from "it never left" (any other error). It also notes on
the try (`attempts.Attempt`) when the message's content starts to go out and when the server took it, so
that a send the worker's time limit cuts short is recorded by how far it got.

The whole session keeps to one deadline (`deadlines.Deadline`, EMAIL_DEADLINE): looking up the mail server,
connecting, the TLS handshake, every command, the message and every answer, each wait also at most
EMAIL_TIMEOUT. EMAIL_TIMEOUT alone bounds each read, so a server trickling its answers a byte at a time
would hold a worker until Celery's soft time limit; the caller records a session the deadline cut short
by how far it got, as one the time limit stopped.
"""

from __future__ import annotations

import functools
import io
import smtplib

from django.conf import settings
from django.core.mail import get_connection
from django.core.mail.backends import smtp

from notifications import deadlines
from notifications.attempts import Attempt
from notifications.deadlines import Deadline, DeadlinePassed

DJANGO_SMTP = "django.core.mail.backends.smtp.EmailBackend"
END_OF_MESSAGE = b"\r\n.\r\n"  # what smtplib's data() sends last: the message is out


class AnswerLost(Exception):
    """The message went out whole, and the server's answer to it never came (`timed_out`) or the
    connection closed first."""

    def __init__(self, message: str, *, timed_out: bool):
        self.timed_out = timed_out
        super().__init__(message)


class _KeepsToDeadline:
    """An SMTP connection whose whole session keeps to `deadline` (each wait also at most smtplib's timeout,
    EMAIL_TIMEOUT); notes on the connection when a message's end has been sent (`message_out`), and on its try
    (`attempt`) when the message starts to go out and when the server answers 250 to it."""

    message_out = False

    def __init__(self, *args, deadline: Deadline, attempt: Attempt, **kwargs):
        self.deadline, self.attempt = deadline, attempt
        super().__init__(*args, **kwargs)  # connects (`_get_socket`) and reads the greeting

    @property
    def _most(self) -> float | None:
        """The longest one wait may take whatever is left of the deadline: smtplib's timeout, when it has one."""
        return self.timeout if isinstance(self.timeout, int | float) else None

    def _get_socket(self, host, port, timeout):
        found = deadlines.resolve(functools.partial(deadlines.addresses, host, port), host, self.deadline)
        return deadlines.connect(found, port, self.deadline, self.source_address, most=self._most)

    def send(self, s):
        if self.sock is not None:  # else smtplib says it is not connected
            try:
                self.sock.settimeout(self.deadline.timeout(self._most))
            except DeadlinePassed as error:  # as smtplib reports a send that failed, so that QUIT is let go
                self.close()
                raise smtplib.SMTPServerDisconnected(f"Connection closed: {error}") from error
        ending = isinstance(s, bytes) and s.endswith(END_OF_MESSAGE)
        if ending:
            self.attempt.begin()  # the content and its end go in this one send: the server may get it whole
        super().send(s)
        if ending:
            self.message_out = True

    def getreply(self):
        if self.file is None and self.sock is not None:  # smtplib would read through sock.makefile("rb")
            self.file = io.BufferedReader(deadlines.Reader(self.sock, self.deadline, self._most))
        return super().getreply()

    def starttls(self, *args, context=None, **kwargs):
        if context is not None:  # smtplib wraps the socket itself: the context keeps the handshake to the deadline
            context = _HandshakeWithin(context, self.deadline, self._most)
        return super().starttls(*args, context=context, **kwargs)

    def data(self, msg):
        code, reply = super().data(msg)
        if code == 250:
            self.attempt.take()
        return code, reply


class _HandshakeWithin:
    """An SSL context whose TLS handshakes wait no longer than what is left of `deadline` (and `most`)."""

    def __init__(self, context, deadline: Deadline, most: float | None):
        self._context, self._deadline, self._most = context, deadline, most

    def wrap_socket(self, sock, **kwargs):
        sock.settimeout(self._deadline.timeout(self._most))  # the whole handshake waits at most this
        return self._context.wrap_socket(sock, **kwargs)


class _SMTP(_KeepsToDeadline, smtplib.SMTP):
    pass


class _SMTP_SSL(_KeepsToDeadline, smtplib.SMTP_SSL):
    def _get_socket(self, host, port, timeout):
        # SMTP_SSL's own, over a connection made within the deadline (which also times the handshake).
        return _HandshakeWithin(self.context, self.deadline, self._most).wrap_socket(
            super()._get_socket(host, port, timeout), server_hostname=self._host)  # fmt: skip


class EmailBackend(smtp.EmailBackend):
    """Django's SMTP backend, keeping each connection's session to `deadline` (a new one of EMAIL_DEADLINE for
    each connection when none is given), raising AnswerLost when a message went out but its answer did not
    come back, and noting on `attempt` how far the send got."""

    def __init__(self, *args, attempt: Attempt | None = None, deadline: Deadline | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempt = attempt or Attempt()
        self.deadline = deadline

    @property
    def connection_class(self):
        smtp_class = _SMTP_SSL if self.use_ssl else _SMTP
        deadline = self.deadline or Deadline(deadlines.email_deadline())
        return functools.partial(smtp_class, deadline=deadline, attempt=self.attempt)

    def _send(self, email_message):
        try:
            return super()._send(email_message)
        except smtplib.SMTPServerDisconnected as error:
            if not getattr(self.connection, "message_out", False):
                raise
            raise AnswerLost(str(error), timed_out="timed out" in str(error)) from error


def connection(attempt: Attempt, deadline: Deadline):
    """The mail connection one message is sent with: Django's as configured (EMAIL_BACKEND), its SMTP
    backend replaced by `EmailBackend`, which keeps the session to `deadline`, tells a lost answer from a
    message never sent and notes on `attempt` how far the send got. Another backend is not seen sending (a
    console, a file, a provider's API): its message is taken to be going out from the start, so a send cut
    short is never sent twice."""
    if settings.EMAIL_BACKEND == DJANGO_SMTP:
        return get_connection(f"{__name__}.EmailBackend", attempt=attempt, deadline=deadline)
    attempt.begin()
    return get_connection()
