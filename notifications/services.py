"""Who hears about a job event, what they are told, and sending it by e-mail or webhook."""

from __future__ import annotations

import http.client
import json
import smtplib
import urllib.error
import urllib.request
from datetime import timedelta
from datetime import timezone as dt_timezone
from email.utils import parsedate_to_datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobs.models import JobEvent
from notifications import mail, messages, outbound
from notifications.attempts import Attempt
from notifications.deadlines import Deadline, NotResolved, email_deadline, webhook_deadline
from notifications.models import MOMENTS, Delivery, Subscription, TeamWebhook
from tenants.permissions import viewers_of

# The longest a receiver's Retry-After is waited: a receiver asking for a day (or for ever) is tried again
# after a quarter of an hour, within its retries, as a receiver that gave no time would be. Longer
# countdowns would also outlive the Redis broker's visibility timeout (an hour), which delivers them again.
RETRY_AFTER_MOST = 15 * 60
# A claim older than this was lost with its worker (killed, or past its time limit): taken again.
STALE_CLAIM = timedelta(minutes=10)
# News older than this is not sent again by `resend_lost` (a broker down for days, or rows left from long ago):
# a job that failed last week is old news, and a burst of it would bury today's.
STALE_NEWS = timedelta(days=1)
# Deliveries one message carries at most (a digest lists `messages.DIGEST_LINES` of them and counts the
# rest): each is claimed and recorded row by row, so one task's writes stay a few hundred; more wait
# for the next message.
DIGEST_MOST = 200


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


def deliveries_for(event: JobEvent) -> list[Delivery]:
    """The deliveries an event calls for, made once: a second call returns the same rows.

    E-mail: each member (or staff) subscribed to the job's team for this moment, and the job's
    owner when subscribed to their own jobs and still in its team, once each, when they have an
    address. Webhook: the
    team's, when it asks for this moment. Returns [] for an event nobody can ask about.
    """
    if event.kind not in MOMENTS:
        return []
    job = event.job
    flag = MOMENTS[event.kind].flag
    # Only people who may still see the job: members of its team, and staff.
    may_see = Q(user__in=get_user_model().objects.filter(viewers_of(job.team_id)))
    subscriptions = _asking(job, flag).filter(may_see).select_related("user")
    wanted = {}
    for subscription in subscriptions:
        if subscription.user.email and subscription.user.is_active:
            wanted[(Delivery.Channel.EMAIL, subscription.user.email)] = subscription.user
    webhook = TeamWebhook.objects.filter(team=job.team_id, **{flag: True}).first()
    if webhook is not None:
        wanted[(Delivery.Channel.WEBHOOK, webhook.url)] = None
    deliveries = []
    for (channel, target), user in wanted.items():
        try:
            with transaction.atomic():
                delivery, _ = Delivery.objects.get_or_create(
                    event=event, channel=channel, target=target, defaults={"job": job, "user": user}
                )
        except IntegrityError:  # a concurrent run of the same task made it first
            delivery = Delivery.objects.get(event=event, channel=channel, target=target)
        deliveries.append(delivery)
    return deliveries


def _asking(job, flag: str):
    """The subscriptions that ask to hear of the job at the moment `flag`: to its team's jobs, or
    its owner's to their own jobs (whether they may still see it is the caller's to check)."""
    return Subscription.objects.filter(Q(team=job.team_id) | Q(team__isnull=True, user=job.owner_id), **{flag: True})


def send(deliveries: list[Delivery], attempt: Attempt) -> None:
    """Sends deliveries to one receiver (one channel and target, oldest first) as one message: a single
    delivery as it always read, several as a digest (`messages`); raises SendFailed saying whether a
    retry may help, or AnswerUnknown. Notes on `attempt` how far it got, for a send cut short (`cut_short`)."""
    first, events = deliveries[0], [delivery.event for delivery in deliveries]
    if first.channel == Delivery.Channel.EMAIL:
        _email(first.target, *messages.email(events), attempt=attempt)
    else:
        _webhook(first.target, messages.webhook_text(events), attempt=attempt)


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


def _email(address: str, subject: str, body: str, *, attempt: Attempt) -> None:
    """Sends one e-mail, its whole session within EMAIL_DEADLINE (`mail.py`); raises SendFailed or AnswerUnknown
    (`_email_failed`) unless the mail server confirmed it."""
    deadline = Deadline(email_deadline())
    try:
        send_mail(subject, body, None, [address], connection=mail.connection(attempt, deadline))
    except (mail.AnswerLost, smtplib.SMTPException, OSError) as error:
        if not attempt.taken:  # else the server confirmed it, and only saying goodbye failed
            raise _email_failed(address, error, deadline, attempt) from error
    attempt.take()


def _email_failed(address: str, error: Exception, deadline: Deadline, attempt: Attempt) -> SendFailed | AnswerUnknown:
    """What an e-mail whose send raised `error` is recorded as. A session the deadline cut short is recorded by
    how far it got, as one the worker's time limit stopped (`cut_short`): AnswerUnknown once the message had
    begun to go out, else a failure to retry."""
    if isinstance(error, NotResolved):
        return SendFailed(f"Could not look up the mail server {error.host} within {deadline.seconds:g} s; the "
                          "e-mail did not go out.", retry=True)  # fmt: skip
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return SendFailed(f"The mail server refused {address}: {error}", retry=False)
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


def _webhook(url: str, text: str, *, attempt: Attempt) -> None:
    """Posts Slack's incoming-webhook JSON: {"text": ...}, within WEBHOOK_DEADLINE in all."""
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
        raise SendFailed(f"The webhook's answer could not be read ({type(error).__name__}: {error}).",
                         retry=True) from error


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


def why_not_wanted(delivery: Delivery) -> str:
    """Why a delivery made earlier must not go out now ("" when it still should): its person left the
    job's team or unsubscribed, or the team's webhook was changed or removed. A retry comes up to
    a quarter of an hour later; it never tells someone who may no longer see the job."""
    event, job = delivery.event, delivery.event.job
    flag = MOMENTS[event.kind].flag
    if delivery.channel == Delivery.Channel.WEBHOOK:
        if not TeamWebhook.objects.filter(team=job.team_id, url=delivery.target, **{flag: True}).exists():
            return f"Not sent: team {job.team.slug}'s webhook was changed or removed since."
        return ""
    user = delivery.user
    if user is None or not user.is_active or user.email != delivery.target:
        return "Not sent: the person's account or address changed since."
    if not get_user_model().objects.filter(viewers_of(job.team_id), pk=user.pk).exists():
        return f"Not sent: {user.username} is no longer in team {job.team.slug}."
    if not _asking(job, flag).filter(user=user).exists():
        return f"Not sent: {user.username} no longer asks to be told."
    return ""


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


def _to_receiver(delivery: Delivery):
    """The deliveries to the same receiver as `delivery` (its channel and target), itself included: what a
    digest gathers, what a retry carries, what a burst waits for."""
    return Delivery.objects.filter(channel=delivery.channel, target=delivery.target)


def _waiting_for(lead: Delivery, waiting: Q, now) -> list[int]:
    """The ids of the deliveries `gather` tries to claim beside the lead, oldest first."""
    found = _to_receiver(lead).filter(waiting, created_at__gte=now - STALE_NEWS)
    return list(found.exclude(pk=lead.pk).order_by("created_at", "pk").values_list("pk", flat=True)[: DIGEST_MOST - 1])


def _take(delivery_id: int, waiting: Q, now) -> bool:
    """Claims the delivery if it is still `waiting`: one conditional UPDATE, so two workers never both take it."""
    return Delivery.objects.filter(waiting, pk=delivery_id).update(
        state=Delivery.State.SENDING, attempts=F("attempts") + 1, claimed_at=now) == 1  # fmt: skip


def held_for_retry(delivery: Delivery) -> float:
    """Seconds until its receiver's next retry, when a delivery to it (the same channel and target) is
    waiting for one; 0 when none is. A receiver that refused (500, a mail server down) or asked to be
    left alone (429's Retry-After) is not sent news made meanwhile sooner: the new delivery waits, and the
    retry's message carries it (`gather` takes every pending delivery), so a receiver that fails for good
    gets one message at each step of one backoff, not six for every event. The wait is written in the
    delivery's retry_at, so that `resend_lost` takes it as due then, not as lost."""
    now = timezone.now()
    retrying = _to_receiver(delivery).filter(state=Delivery.State.RETRYING, retry_at__gt=now,
                                            created_at__gte=now - STALE_NEWS)  # fmt: skip
    due = retrying.order_by("retry_at").values_list("retry_at", flat=True).first()
    if due is None:
        return 0.0
    Delivery.objects.filter(pk=delivery.pk, state=Delivery.State.PENDING).update(retry_at=due)
    delivery.retry_at = due
    return (due - now).total_seconds()


def gathering_wait(delivery: Delivery) -> float:
    """Seconds the first send of `delivery` waits so that a burst to its receiver goes out as one digest:
    NOTIFY_BATCH_SECONDS when another delivery to the same receiver was made within that time, else 0
    (a lone message goes at once, as does everything when the setting is 0)."""
    window = batch_seconds()
    if not window:
        return 0.0
    near = _to_receiver(delivery).filter(created_at__gte=delivery.created_at - timedelta(seconds=window))
    return window if near.exclude(pk=delivery.pk).exists() else 0.0


def batch_seconds() -> float:
    """NOTIFY_BATCH_SECONDS: how long a burst of deliveries to one receiver gathers before its digest goes out."""
    window = getattr(settings, "NOTIFY_BATCH_SECONDS", 10)
    if isinstance(window, bool) or not isinstance(window, int | float) or window < 0:
        raise ImproperlyConfigured(f"NOTIFY_BATCH_SECONDS must be a number of seconds, 0 or more (0: digests "
                                   f"never wait), not {window!r}.")  # fmt: skip
    return float(window)


def still_wanted(digest: list[Delivery]) -> list[Delivery]:
    """The deliveries of a claimed digest that may go out: each one tried before (a retry) that is no
    longer wanted (`why_not_wanted`) is recorded failed, saying why, and left out."""
    wanted = []
    for delivery in digest:
        unwanted = delivery.attempts > 1 and why_not_wanted(delivery)
        if unwanted:
            record([delivery], error=SendFailed(unwanted, retry=False), final=True, digest_size=None)
        else:
            wanted.append(delivery)
    return wanted


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
    # Due at its retry_at: a retry, or a pending delivery held for its receiver's retry (`held_for_retry`).
    # One without retry_at (a retry scheduled before retry_at was kept, news sent at once) by when it was made.
    due = Q(retry_at__lt=overdue) | Q(retry_at__isnull=True, created_at__lt=overdue)
    return lost_claim(now) | Q(due, state__in=(Delivery.State.PENDING, Delivery.State.RETRYING))


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


def subscriptions_set(*, user, choices: dict) -> None:
    """Stores a person's choices ({team or None: {flag: bool}}); a scope with nothing chosen is removed."""
    with transaction.atomic():
        for team, flags in choices.items():
            team_id = team.pk if team else None
            if any(flags.values()):
                Subscription.objects.update_or_create(user=user, team_id=team_id, defaults=flags)
            else:
                Subscription.objects.filter(user=user, team_id=team_id).delete()


def webhook_set(*, team, url: str, flags: dict, actor) -> TeamWebhook | None:
    """Sets the team's webhook (or removes it when `url` is empty); returns it, or None once removed."""
    if not url:
        TeamWebhook.objects.filter(team=team).delete()
        return None
    webhook, _ = TeamWebhook.objects.update_or_create(team=team, defaults={"url": url, "updated_by": actor, **flags})
    return webhook
