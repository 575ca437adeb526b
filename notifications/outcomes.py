"""How a send ended, and writing it down: a failure (to retry or not), a message whose answer never came,
what a send the worker's time limit cut short counts as, and each delivery's record of it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from notifications.attempts import Attempt
from notifications.models import Delivery


class SendFailed(Exception):
    """Sending did not work; `retry` says whether trying again later may help, `after` how many
    seconds the receiver asked to wait (429's Retry-After), None when it did not say."""

    def __init__(self, message: str, *, retry: bool, after: float | None = None):
        self.retry = retry
        self.after = after
        super().__init__(message)


class AnswerUnknown(Exception):
    """The message went out, but its receiver did not answer in time: it may well have it, so it is
    not sent again (a slow Slack channel or a mail server scanning each message would get it six
    times); recorded as sent, saying so."""


def cut_short(channel: str, attempt: Attempt) -> Exception | None:
    """What a send the worker's soft time limit stopped is recorded as, by how far it got: None (sent) when
    its receiver had taken the message; AnswerUnknown when the message had begun to go out, as its receiver
    may have it and must not get it twice; else SendFailed to retry, as nothing of it left."""
    if attempt.taken:
        return None
    message, receiver = ("e-mail", "the mail server") if channel == Delivery.Channel.EMAIL else ("message", "the webhook")
    if attempt.began:
        return AnswerUnknown(f"Stopped at the worker's time limit while the {message} was going out or awaiting "
                             f"{receiver}'s answer; it may well have been received, so it is not sent again.")  # fmt: skip
    return SendFailed(f"Stopped at the worker's time limit before the {message} went out; it is tried again.",
                      retry=True)


def record(deliveries: list[Delivery], *, error: Exception | None = None, final: bool = True,
           retry_in: float | None = None, digest_size: int | None = 1) -> None:
    """Writes how sending went, the same for each delivery (one message carried them): sent (with a note
    when its answer is unknown), retrying (with the error, all due `retry_in` seconds from now), or
    failed. `digest_size` is how many deliveries that message carried; None leaves it as it was (a
    delivery dropped before any message)."""
    now = timezone.now()
    if error is None or isinstance(error, AnswerUnknown):
        outcome = {"state": Delivery.State.SENT, "error": str(error or ""), "sent_at": now, "retry_at": None}
    else:
        outcome = {"state": Delivery.State.FAILED if final else Delivery.State.RETRYING, "error": str(error)[:2000],
                   "retry_at": None if final else now + timedelta(seconds=retry_in or 0)}  # fmt: skip
    if digest_size is not None:
        outcome["digest_size"] = digest_size
    Delivery.objects.filter(pk__in=[delivery.pk for delivery in deliveries]).update(**outcome)
    for delivery in deliveries:
        for field, value in outcome.items():
            setattr(delivery, field, value)
