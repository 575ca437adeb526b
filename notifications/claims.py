"""Taking deliveries to send, so that no two workers send the same one: a delivery claimed with a conditional
UPDATE, the others to its receiver gathered with it into one digest, and those no task will run again (their
worker died, or the broker lost their task), found for beat to send again or, when old news, to give up on."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from notifications.models import Delivery

# A claim older than this was lost with its worker (killed, or past its time limit): taken again.
STALE_CLAIM = timedelta(minutes=10)
# News older than this is not sent again by `resend_lost` (a broker down for days, or rows left from long ago):
# a job that failed last week is old news, and a burst of it would bury today's.
STALE_NEWS = timedelta(days=1)
# Deliveries one message carries at most (a digest lists `messages.DIGEST_LINES` of them and counts the
# rest): each is claimed and recorded row by row, so one task's writes stay a few hundred; more wait
# for the next message.
DIGEST_MOST = 200


def claim(delivery_id: int, *, tried: int | None = None) -> Delivery | None:
    """The delivery, claimed for sending with a conditional UPDATE, or None when it is not waiting to be sent.

    Two workers running the same delivery never both send it: the second update matches no row. A
    claim older than STALE_CLAIM was lost with its worker: the delivery is taken again (`resend_lost`).
    Each claim counts an attempt, so `attempts - 1` is how many times it was tried before. `tried`,
    when given, is that count as its task was enqueued: a delivery tried since went out in another
    task's digest (sent, or retrying with it), so this task is stale and claims nothing.
    """
    now = timezone.now()
    waiting = Q(state__in=(Delivery.State.PENDING, Delivery.State.RETRYING)) | lost_claim(now)
    if tried is not None:
        waiting &= Q(attempts=tried)
    if not _take(delivery_id, waiting, now):
        return None
    return Delivery.objects.select_related("event__job__team", "user").get(pk=delivery_id)


def gather(lead: Delivery) -> list[Delivery]:
    """The other deliveries to the lead's receiver (same channel and target) that wait to be sent and are
    due, each claimed as `claim` claims one, oldest first: at most DIGEST_MOST with the lead; [] when none.

    Due: never tried, retrying no later than the lead (a digest that failed retries together: its
    deliveries share retry_at), or lost with their worker. One being sent by another task, or waiting
    for a retry later than the lead's, is left to its own task; so is news older than STALE_NEWS.
    Two tasks gathering at once may list the same deliveries; each conditional UPDATE gives a delivery
    to one of them only.
    """
    now = timezone.now()
    due = max(now, lead.retry_at) if lead.retry_at else now
    waiting = (Q(state=Delivery.State.PENDING) | Q(state=Delivery.State.RETRYING, retry_at__lte=due)
               | lost_claim(now))  # fmt: skip
    listed = _waiting_for(lead, waiting, now)
    taken = [delivery_id for delivery_id in listed if _take(delivery_id, waiting, now)]
    return list(Delivery.objects.filter(pk__in=taken).select_related("event__job__team", "user")
                .order_by("created_at", "pk"))  # fmt: skip


def to_receiver(delivery: Delivery):
    """The deliveries to the same receiver as `delivery` (its channel and target), itself included: what a
    digest gathers, what a retry carries, what a burst waits for (`batching`)."""
    return Delivery.objects.filter(channel=delivery.channel, target=delivery.target)


def _waiting_for(lead: Delivery, waiting: Q, now) -> list[int]:
    """The ids of the deliveries `gather` tries to claim beside the lead, oldest first."""
    found = to_receiver(lead).filter(waiting, created_at__gte=now - STALE_NEWS)
    return list(found.exclude(pk=lead.pk).order_by("created_at", "pk").values_list("pk", flat=True)[: DIGEST_MOST - 1])


def _take(delivery_id: int, waiting: Q, now) -> bool:
    """Claims the delivery if it is still `waiting`: one conditional UPDATE, so two workers never both take it."""
    return Delivery.objects.filter(waiting, pk=delivery_id).update(
        state=Delivery.State.SENDING, attempts=F("attempts") + 1, claimed_at=now) == 1  # fmt: skip


def lost_claim(now) -> Q:
    """Deliveries whose worker died sending them: claimed longer than STALE_CLAIM ago (or before
    claims were timed)."""
    return Q(state=Delivery.State.SENDING) & (Q(claimed_at__lt=now - STALE_CLAIM) | Q(claimed_at__isnull=True))


def lost(now) -> Q:
    """Deliveries no task will run again unless they are enqueued anew: those whose worker died sending
    them (`lost_claim`), those made but not enqueued (notify's worker died, or the broker refused), and
    those whose retry is long overdue (the broker refused it, and Celery then drops the task, or Redis
    lost its queue). Each was due STALE_CLAIM ago or more, so a message merely late in a busy queue is
    rarely doubled, and a doubled one is claimed once (`claim`); none was made more than STALE_NEWS ago."""
    return Q(created_at__gte=now - STALE_NEWS) & _stranded(now)


def too_old(now) -> Q:
    """Deliveries `lost` would send again but that were made more than STALE_NEWS ago: old news, never
    sent; `resend_lost` records them as failed, so that none stays pending for good."""
    return Q(created_at__lt=now - STALE_NEWS) & _stranded(now)


def _stranded(now) -> Q:
    """Deliveries no task will run again: their worker died sending them, they were made but never
    enqueued, or their retry is long overdue; each was due STALE_CLAIM ago or more."""
    overdue = now - STALE_CLAIM
    # Due at its retry_at: a retry, or a pending delivery held for its receiver's retry (`batching.held_for_retry`).
    # One without retry_at (a retry scheduled before retry_at was kept, news sent at once) by when it was made.
    due = Q(retry_at__lt=overdue) | Q(retry_at__isnull=True, created_at__lt=overdue)
    return lost_claim(now) | Q(due, state__in=(Delivery.State.PENDING, Delivery.State.RETRYING))
