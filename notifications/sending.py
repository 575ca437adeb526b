"""Sending the deliveries to one receiver as one message, by the receiver's channel: e-mail (`emails.py`) or a
team's webhook (`webhooks.py`)."""

from __future__ import annotations

from notifications import emails, messages, webhooks
from notifications.attempts import Attempt
from notifications.models import Delivery


def send(deliveries: list[Delivery], attempt: Attempt) -> None:
    """Sends deliveries to one receiver (one channel and target, oldest first) as one message: a single
    delivery as it always read, several as a digest (`messages`); raises SendFailed saying whether a retry
    may help, or AnswerUnknown (`outcomes`). Notes on `attempt` how far it got, for a send cut short
    (`outcomes.cut_short`)."""
    first, events = deliveries[0], [delivery.event for delivery in deliveries]
    if first.channel == Delivery.Channel.EMAIL:
        emails.send(first.target, *messages.email(events), attempt=attempt)
    else:
        webhooks.post(first.target, messages.webhook_text(events), attempt=attempt)
