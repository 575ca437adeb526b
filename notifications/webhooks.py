"""Posting one message to a team's webhook and reading its answer: through the connection that reaches only
public addresses (`outbound.py`), the whole exchange within WEBHOOK_DEADLINE; a 429's Retry-After is honoured,
up to a cap."""

from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from datetime import timezone as dt_timezone
from email.utils import parsedate_to_datetime

from django.utils import timezone

from notifications import outbound
from notifications.attempts import Attempt
from notifications.deadlines import Deadline, NotResolved, webhook_deadline
from notifications.outcomes import AnswerUnknown, SendFailed

log = logging.getLogger("gangway.notifications")

# The longest a receiver's Retry-After is waited: a receiver asking for a day (or for ever) is tried again
# after a quarter of an hour, within its retries, as a receiver that gave no time would be. Longer
# countdowns would also outlive the Redis broker's visibility timeout (an hour), which delivers them again.
RETRY_AFTER_MOST = 15 * 60


def post(url: str, text: str, *, attempt: Attempt) -> None:
    """Posts Slack's incoming-webhook JSON: {"text": ...}, within WEBHOOK_DEADLINE in all; raises SendFailed or
    AnswerUnknown unless the receiver answered 2xx."""
    if problem := outbound.url_problem(url):  # saved before it was checked, or set in the admin
        raise SendFailed(f"Not sent: the webhook's URL cannot be posted to. {problem}; a lead of the team saves it "
                         "again on the notifications page.", retry=False)  # fmt: skip
    body = {"text": text, "username": "Gangway"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gangway"})  # fmt: skip
    deadline = Deadline(webhook_deadline())
    try:
        with outbound.opener(deadline=deadline, attempt=attempt).open(request, timeout=deadline.seconds):
            attempt.take()  # a 2xx: its status is the answer, its body is not waited for
    except urllib.error.HTTPError as error:
        retry = error.code == 429 or error.code >= 500
        raise SendFailed(f"The webhook answered {error.code} {error.reason}.", retry=retry,
                         after=_retry_after(error.headers.get("Retry-After"))) from error
    except urllib.error.URLError as error:  # before the answer: connecting or posting
        reason = error.reason
        if isinstance(reason, outbound.PrivateAddress):
            raise SendFailed(f"Not sent: {reason}.", retry=False) from error
        if isinstance(reason, NotResolved):  # as a receiver that cannot be reached: nothing went out
            raise SendFailed(f"Could not look up the webhook's host {reason.host} within {deadline.seconds:g} s; "
                             "the message did not go out.", retry=True) from error  # fmt: skip
        if isinstance(reason, TimeoutError):
            raise _late(deadline, attempt) from error
        raise SendFailed(f"Could not reach the webhook: {reason}", retry=True) from error
    except TimeoutError as error:  # the post went out; its answer did not come within the deadline
        raise _late(deadline, attempt) from error
    except (http.client.HTTPException, OSError) as error:  # reset, or an answer that is not HTTP
        # Its text may repeat what the receiver answered: the record names its class only, the log has the rest.
        log.warning("a webhook's answer could not be read: %r", error)
        raise SendFailed(f"The webhook's answer could not be read ({type(error).__name__}).", retry=True) from error


def _late(deadline: Deadline, attempt: Attempt) -> Exception:
    """What a webhook exchange that used up its deadline is recorded as: a failure to retry with backoff when
    the post never went out (connecting took it all, or a TLS handshake that trickled), else AnswerUnknown:
    the receiver may have the message, and is not sent it again."""
    if attempt.began:
        return AnswerUnknown(f"The webhook took longer than {deadline.seconds:g} s to answer; it may well have "
                             "received the message, so it is not sent again.")  # fmt: skip
    return SendFailed(f"Could not reach the webhook within {deadline.seconds:g} s; the message did not go out.",
                      retry=True)  # fmt: skip


def _retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks to wait, given in seconds or as a date, at most RETRY_AFTER_MOST;
    None when there is none or it is neither."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000": UTC, as HTTP dates are
            when = when.replace(tzinfo=dt_timezone.utc)
        seconds = (when - timezone.now()).total_seconds()
    return min(max(0.0, seconds), RETRY_AFTER_MOST)  # NaN and negatives: 0; infinity: the cap
