"""Sending one e-mail and telling how it failed: through the deadline-keeping mail connection (`mail.py`), the
whole SMTP session within EMAIL_DEADLINE."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import send_mail

from notifications import mail
from notifications.attempts import Attempt
from notifications.deadlines import Deadline, NotResolved, email_deadline
from notifications.outcomes import AnswerUnknown, SendFailed


def send(address: str, subject: str, body: str, *, attempt: Attempt) -> None:
    """Sends one e-mail, its whole session within EMAIL_DEADLINE (`mail.py`); raises SendFailed or AnswerUnknown
    (`_failed`) unless the mail server confirmed it."""
    deadline = Deadline(email_deadline())
    try:
        send_mail(subject, body, None, [address], connection=mail.connection(attempt, deadline))
    except (mail.AnswerLost, smtplib.SMTPException, OSError) as error:
        if not attempt.taken:  # else the server confirmed it, and only saying goodbye failed
            raise _failed(error, deadline, attempt) from error
    attempt.take()


def _failed(error: Exception, deadline: Deadline, attempt: Attempt) -> SendFailed | AnswerUnknown:
    """What an e-mail whose send raised `error` is recorded as. A session the deadline cut short is recorded by
    how far it got, as one the worker's time limit stopped (`outcomes.cut_short`): AnswerUnknown once the message
    had begun to go out, else a failure to retry."""
    if isinstance(error, NotResolved):
        return SendFailed(f"Could not look up the mail server {error.host} within {deadline.seconds:g} s; the "
                          "e-mail did not go out.", retry=True)  # fmt: skip
    if isinstance(error, smtplib.SMTPRecipientsRefused):  # its text repeats the address, which the log must not
        codes = ", ".join(sorted({str(code) for code, _ in error.recipients.values()}))
        return SendFailed(f"The mail server refused the recipient's address ({codes}); check the address on the "
                          "account.", retry=False)  # fmt: skip
    if isinstance(error, smtplib.SMTPResponseException):  # 4xx may pass; 5xx (credentials, sender) will not
        said = error.smtp_error.decode(errors="replace") if isinstance(error.smtp_error, bytes) else error.smtp_error
        return SendFailed(f"The mail server answered {error.smtp_code} {said}", retry=error.smtp_code < 500)
    if deadline.passed():
        if attempt.began:
            return AnswerUnknown(f"The mail server did not confirm the e-mail within {deadline.seconds:g} s; it "
                                 "may well have received it, so it is not sent again.")  # fmt: skip
        return SendFailed(f"Could not hand the e-mail to the mail server within {deadline.seconds:g} s; it did "
                          "not go out.", retry=True)  # fmt: skip
    if isinstance(error, mail.AnswerLost):  # the message went out: sent again, it would arrive twice
        late = (f"took longer than {settings.EMAIL_TIMEOUT} s to confirm the e-mail" if error.timed_out
                else "closed the connection before confirming the e-mail")  # fmt: skip
        return AnswerUnknown(f"The mail server {late}; it may well have received it, so it is not sent again.")
    return SendFailed(f"Could not send the e-mail: {error}", retry=True)
