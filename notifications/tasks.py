"""Celery tasks that send notifications: one finds who hears about an event, one sends each message."""

from __future__ import annotations

import logging
import random

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from jobs.models import JobEvent
from notifications import audience, batching, claims, outcomes, retention, sending, token_notices
from notifications.attempts import Attempt
from notifications.models import Delivery, PendingEvent

log = logging.getLogger("gangway.notifications")
NOT_SENT_OLD_NEWS = "Not sent: no worker sent it within a day of the event, and old news is not sent."
MAX_RETRIES = 5


@shared_task(name="notifications.notify", ignore_result=True)
def notify(event_id: int) -> int:
    """Makes the event's deliveries and enqueues each one still to send; returns how many were enqueued.

    Returns 0 when the event is gone. A second run finds the same deliveries and enqueues
    only those still waiting, so nobody is told twice. A delivery to a receiver waiting for a retry
    goes with that retry (`batching.held_for_retry`); else one with others to its receiver close by
    waits NOTIFY_BATCH_SECONDS, so that a burst goes out as one digest (`deliver`).
    """
    event = JobEvent.objects.select_related("job__team").filter(pk=event_id).first()
    if event is None:
        return 0
    waiting = [d for d in audience.deliveries_for(event) if d.state == Delivery.State.PENDING]
    for delivery in waiting:
        wait = batching.held_for_retry(delivery) or batching.gathering_wait(delivery)
        deliver.apply_async((delivery.pk, 0), countdown=wait)
    PendingEvent.objects.filter(event_id=event_id).delete()  # worked out: resend_lost leaves it be
    return len(waiting)


# max_retries=None: the task is retried for a whole digest, whose deliveries each count their own
# tries (`attempts`), and it stops once every one of them is sent or has had MAX_RETRIES retries.
@shared_task(bind=True, name="notifications.deliver", ignore_result=True, max_retries=None)
def deliver(self, delivery_id: int, tried: int | None = None) -> str:
    """Sends one delivery, and with it, as one message (a digest), the others to the same receiver that
    wait and are due (`claims.gather`); retried with backoff (30 s, 1, 2, 4, 8 min, a fifth more or
    less so that a burst's retries spread out, and never before a 429's Retry-After, up to
    `webhooks.RETRY_AFTER_MOST`) while the failure may pass.

    Returns the state the delivery's message reached; "skipped" when it was not waiting (sent, failed,
    being sent, or `tried` shows it went out since in another task's digest). Every delivery of the
    digest is recorded as a single one would be: each send first drops each no longer wanted
    (`audience.why_not_wanted`), and a failure retries together those with tries left (the same
    retry_at) and fails the rest; an error nobody foresaw is recorded and retried like any other, so
    a delivery never stays "sending", and a send the worker's soft time limit stops is recorded by how
    far it got (`_send`). Tries are counted by each delivery's claims, not the task's
    retries: a delivery `resend_lost` enqueues anew is a retry too.
    """
    lead = claims.claim(delivery_id, tried=tried)
    if lead is None:
        return "skipped"
    digest = audience.still_wanted([lead, *claims.gather(lead)])
    if not digest:
        return Delivery.State.FAILED
    digest.sort(key=lambda delivery: (delivery.created_at, delivery.pk))
    error = _send(digest)
    if error is None or isinstance(error, outcomes.AnswerUnknown):
        outcomes.record(digest, error=error, digest_size=len(digest))
        return Delivery.State.SENT
    most_tried = max(delivery.attempts for delivery in digest) - 1  # the backoff follows the most tried
    wait = max(30 * 2**most_tried * random.uniform(0.8, 1.2), error.after or 0)
    again = [d for d in digest if error.retry and d.attempts - 1 < MAX_RETRIES]
    done = [d for d in digest if d not in again]
    outcomes.record(done, error=error, final=True, digest_size=len(digest))
    outcomes.record(again, error=error, final=False, retry_in=wait, digest_size=len(digest))
    log.warning("notification %s to %s (%d in its message): %s", lead.pk, lead.channel, len(digest), error)
    if not again:
        return Delivery.State.FAILED
    # Should the broker refuse the retry, Celery drops the task; `resend_lost` sends it once overdue.
    raise self.retry(args=(again[0].pk, again[0].attempts), countdown=wait)


def _send(digest: list[Delivery]) -> outcomes.SendFailed | outcomes.AnswerUnknown | None:
    """Sends the digest's message; returns None once its receiver took it, else AnswerUnknown (it may have
    it: never sent again) or SendFailed (saying whether a retry may help).

    The worker's soft time limit may stop the send anywhere: how far it got tells what to record
    (`outcomes.cut_short`), so that a message that may have reached its receiver is never retried and one
    that never left is. An error nobody foresaw is a failure to retry, so a delivery never stays "sending".
    """
    attempt = Attempt()
    try:
        sending.send(digest, attempt)
    except (outcomes.AnswerUnknown, outcomes.SendFailed) as error:
        return error
    except SoftTimeLimitExceeded:
        return outcomes.cut_short(digest[0].channel, attempt)
    except Exception as error:  # noqa: BLE001 - recorded and retried: never left "sending"
        # Its text may carry a secret (a URL with its token, a server's answer): the record names its class only,
        # the log has the whole of it for operators, naming the delivery, never its receiver.
        log.exception("notification %s to %s failed unexpectedly", digest[0].pk, digest[0].channel)
        return outcomes.SendFailed(f"Sending failed unexpectedly ({type(error).__name__}); the worker's log has "
                                   "the details.", retry=True)  # fmt: skip
    return None


@shared_task(name="notifications.resend_lost", ignore_result=True)
def resend_lost() -> int:
    """Sends again what no task will run: the deliveries of `claims.lost` (their worker died while
    sending them, or their first send or retry never reached the broker) and the events whose
    `notify` never ran to its end (`PendingEvent`s older than STALE_CLAIM: the broker refused the
    task, or its worker died); returns how many tasks were enqueued. Nothing made more than STALE_NEWS
    ago is sent: such a delivery is recorded as failed, saying so (`claims.too_old`). Beat runs it
    every few minutes."""
    now = timezone.now()
    if old := Delivery.objects.filter(claims.too_old(now)).update(
            state=Delivery.State.FAILED, retry_at=None, error=NOT_SENT_OLD_NEWS):  # fmt: skip
        log.warning("recorded %d deliveries as failed, never sent within %s: old news", old, claims.STALE_NEWS)
    lost = list(Delivery.objects.filter(claims.lost(now)).values_list("pk", "attempts"))
    for delivery_id, tried in lost:
        deliver.delay(delivery_id, tried)
    pending = PendingEvent.objects.filter(created_at__lt=now - claims.STALE_CLAIM)
    if old := pending.filter(created_at__lt=now - claims.STALE_NEWS).delete()[0]:
        log.warning("dropped the notifications of %d events older than %s: old news", old, claims.STALE_NEWS)
    events = list(pending.values_list("event_id", flat=True))
    for event_id in events:
        notify.delay(event_id)
    return len(lost) + len(events)


@shared_task(name="notifications.prune_deliveries", ignore_result=True)
def prune_deliveries() -> int:
    """Deletes the records of deliveries sent or failed longer than DELIVERY_RETENTION ago
    (`retention.deliveries_prune`), and the notices made as long ago of API tokens that no longer authenticate
    (`retention.token_notices_prune`); returns how many rows went. Beat runs it every hour."""
    now = timezone.now()
    deleted = retention.deliveries_prune(now=now)
    if deleted:
        log.info("deleted %d deliveries sent or failed longer than DELIVERY_RETENTION ago", deleted)
    notices = retention.token_notices_prune(now=now)
    if notices:
        log.info("deleted %d token expiry notices made longer than DELIVERY_RETENTION ago", notices)
    return deleted + notices


@shared_task(name="notifications.warn_expiring_tokens", ignore_result=True)
def warn_expiring_tokens() -> int:
    """Makes the notices of API tokens that expire soon (`token_notices.notices_due`), gives up on those whose token
    was revoked or expired before they went, and enqueues each still to send, those that failed for a while among
    them; returns how many were enqueued. Beat runs it every hour."""
    now = timezone.now()
    if made := len(token_notices.notices_due(now)):
        log.info("%d people are to be told that an API token expires soon", made)
    if dropped := token_notices.give_up_on_dead_tokens():
        log.info("%d token expiry notices were not sent: their tokens were revoked or expired first", dropped)
    waiting = token_notices.to_send(now)
    for notice_id in waiting:
        send_token_notice.delay(notice_id)
    return len(waiting)


@shared_task(name="notifications.send_token_notice", ignore_result=True)
def send_token_notice(notice_id: int) -> str:
    """Sends one token notice unless another worker has or is sending it; returns the state it reached, "skipped"
    when it was not waiting or is gone (`token_notices.send`)."""
    return token_notices.send(notice_id)
