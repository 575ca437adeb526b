"""E-mail through Django's mail settings, telling a message whose confirmation was lost from one never sent.

A mail server takes a message whole (DATA, then the lines, then a lone ".") and only then answers
250; many scan it first. When that answer does not come in time (EMAIL_TIMEOUT) or the connection
drops before it, the server may well have the message, and sending it again would deliver it
twice, or six times over the retries. smtplib reports both as SMTPServerDisconnected, wherever
they happen: the client here notes when the message's end has gone out, so that the caller can
tell "the server may have it" (`AnswerLost`) from "it never left" (any other error). It also notes on
the try (`attempts.Attempt`) when the message's content starts to go out and when the server took it, so
that a send the worker's time limit cuts short is recorded by how far it got.
"""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import get_connection
from django.core.mail.backends import smtp

from notifications.attempts import Attempt

DJANGO_SMTP = "django.core.mail.backends.smtp.EmailBackend"
END_OF_MESSAGE = b"\r\n.\r\n"  # what smtplib's data() sends last: the message is out


class AnswerLost(Exception):
    """The message went out whole, and the server's answer to it never came (`timed_out`) or the
    connection closed first."""

    def __init__(self, message: str, *, timed_out: bool):
        self.timed_out = timed_out
        super().__init__(message)


class _NotesMessageOut:
    """Notes on the connection when a message's end has been sent (`message_out`), and on its try (`attempt`)
    when the message starts to go out and when the server answers 250 to it."""

    message_out = False
    attempt: Attempt | None = None

    def send(self, s):
        ending = isinstance(s, bytes) and s.endswith(END_OF_MESSAGE)
        if ending and self.attempt is not None:
            self.attempt.begin()  # the content and its end go in this one send: the server may get it whole
        super().send(s)
        if ending:
            self.message_out = True

    def data(self, msg):
        code, reply = super().data(msg)
        if code == 250 and self.attempt is not None:
            self.attempt.take()
        return code, reply


class _SMTP(_NotesMessageOut, smtplib.SMTP):
    pass


class _SMTP_SSL(_NotesMessageOut, smtplib.SMTP_SSL):
    pass


class EmailBackend(smtp.EmailBackend):
    """Django's SMTP backend, raising AnswerLost when a message went out but its answer did not come back, and
    noting on `attempt` how far the send got."""

    def __init__(self, *args, attempt: Attempt | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempt = attempt or Attempt()

    def open(self):
        opened = super().open()
        if self.connection is not None:
            self.connection.attempt = self.attempt
        return opened

    @property
    def connection_class(self):
        return _SMTP_SSL if self.use_ssl else _SMTP

    def _send(self, email_message):
        try:
            return super()._send(email_message)
        except smtplib.SMTPServerDisconnected as error:
            if not getattr(self.connection, "message_out", False):
                raise
            raise AnswerLost(str(error), timed_out="timed out" in str(error)) from error


def connection(attempt: Attempt):
    """The mail connection one message is sent with: Django's as configured (EMAIL_BACKEND), its SMTP
    backend replaced by `EmailBackend`, which tells a lost answer from a message never sent and notes on
    `attempt` how far the send got. Another backend is not seen sending (a console, a file, a provider's
    API): its message is taken to be going out from the start, so a send cut short is never sent twice."""
    if settings.EMAIL_BACKEND == DJANGO_SMTP:
        return get_connection(f"{__name__}.EmailBackend", attempt=attempt)
    attempt.begin()
    return get_connection()
