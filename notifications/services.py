"""Who hears about a job event, what they are told, and sending it by e-mail or webhook."""

from __future__ import annotations

import http.client
import json
import smtplib
import urllib.error
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobs.models import JobEvent
from notifications import outbound
from notifications.models import MOMENTS, Delivery, Subscription, TeamWebhook
from tenants.permissions import viewers_of

WEBHOOK_TIMEOUT = 5  # seconds; a slow receiver is retried later, it never holds a worker long
# A claim older than this was lost with its worker (killed, or past its time limit): taken again.
STALE_CLAIM = timedelta(minutes=10)
# News older than this is not sent again by `resend_lost` (a broker down for days, or rows left from long ago):
# a job that failed last week is old news, and a burst of it would bury today's.
STALE_NEWS = timedelta(days=1)


class SendFailed(Exception):
    """Sending did not work; `retry` says whether trying again later may help, `after` how many
    seconds the receiver asked to wait (429's Retry-After), None when it did not say."""

    def __init__(self, message: str, *, retry: bool, after: float | None = None):
        self.retry = retry
        self.after = after
        super().__init__(message)


class AnswerUnknown(Exception):
    """The message went out, but its receiver did not answer in time: it may well have it, so it is
    not sent again (a slow Slack channel would get it six times); recorded as sent, saying so."""


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
    flag = MOMENTS[event.kind][0]
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


def sentence(event: JobEvent) -> str:
    """ "Job resnet (#12) of team maps failed: Replica worker-0 exited with code 1 (Error): ..." """
    job = event.job
    return f"Job {job.name} (#{job.pk}) of team {job.team.slug} {MOMENTS[event.kind][1]}: {event.message}"


def job_link(event: JobEvent) -> str:
    """The job page's address, or "" when PUBLIC_URL is not set."""
    return f"{settings.PUBLIC_URL}{event.job.get_absolute_url()}" if settings.PUBLIC_URL else ""


def send(delivery: Delivery) -> None:
    """Sends one delivery; raises SendFailed saying whether a retry may help."""
    event = delivery.event
    text, link = sentence(event), job_link(event)
    if delivery.channel == Delivery.Channel.EMAIL:
        _email(delivery.target, event, text, link)
    else:
        _webhook(delivery.target, text, link)


def _email(address: str, event: JobEvent, text: str, link: str) -> None:
    job = event.job
    subject = f"[Gangway] {job.name} (#{job.pk}) {MOMENTS[event.kind][1]}"
    body = text + (f"\n\n{link}\n" if link else "\n")
    try:
        send_mail(subject, body, None, [address])
    except smtplib.SMTPRecipientsRefused as error:
        raise SendFailed(f"The mail server refused {address}: {error}", retry=False) from error
    except smtplib.SMTPResponseException as error:  # 4xx may pass; 5xx (credentials, sender) will not
        said = error.smtp_error.decode(errors="replace") if isinstance(error.smtp_error, bytes) else error.smtp_error
        raise SendFailed(f"The mail server answered {error.smtp_code} {said}", retry=error.smtp_code < 500) from error
    except (smtplib.SMTPException, OSError) as error:
        raise SendFailed(f"Could not send the e-mail: {error}", retry=True) from error


def _webhook(url: str, text: str, link: str) -> None:
    """Posts Slack's incoming-webhook JSON: {"text": ...}, the link in Slack's <url|label> form."""
    body = {"text": f"{text} <{link}|Open the job>" if link else text, "username": "Gangway"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gangway"})  # fmt: skip
    try:
        with outbound.opener().open(request, timeout=WEBHOOK_TIMEOUT) as answer:
            answer.read(1024)
    except urllib.error.HTTPError as error:
        retry = error.code == 429 or error.code >= 500
        raise SendFailed(f"The webhook answered {error.code} {error.reason}.", retry=retry,
                         after=_retry_after(error.headers.get("Retry-After"))) from error
    except urllib.error.URLError as error:  # before the post went out: connecting or sending
        reason = error.reason
        if isinstance(reason, outbound.PrivateAddress):
            raise SendFailed(f"Not sent: {reason}.", retry=False) from error
        raise SendFailed(f"Could not reach the webhook: {reason}", retry=True) from error
    except TimeoutError as error:  # the post went out; its answer did not come in time
        raise AnswerUnknown(f"The webhook took longer than {WEBHOOK_TIMEOUT} s to answer; it may well have "
                            "received the message, so it is not sent again.") from error
    except (http.client.HTTPException, OSError) as error:  # reset, or an answer that is not HTTP
        raise SendFailed(f"The webhook's answer could not be read ({type(error).__name__}: {error}).",
                         retry=True) from error


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header given in seconds; None for a date or nothing."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def why_not_wanted(delivery: Delivery) -> str:
    """Why a delivery made earlier must not go out now ("" when it still should): its person left the
    job's team or unsubscribed, or the team's webhook was changed or removed. A retry comes up to
    a quarter of an hour later; it never tells someone who may no longer see the job."""
    event, job = delivery.event, delivery.event.job
    flag = MOMENTS[event.kind][0]
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


def claim(delivery_id: int) -> Delivery | None:
    """The delivery, claimed for sending with a conditional UPDATE, or None when it is not waiting to be sent.

    Two workers running the same delivery never both send it: the second update matches no row. A
    claim older than STALE_CLAIM was lost with its worker: the delivery is taken again (`resend_lost`).
    Each claim counts an attempt, so `attempts - 1` is how many times it was tried before.
    """
    now = timezone.now()
    waiting = Q(state__in=(Delivery.State.PENDING, Delivery.State.RETRYING))
    claimed = Delivery.objects.filter(waiting | lost_claim(now), pk=delivery_id).update(
        state=Delivery.State.SENDING, attempts=F("attempts") + 1, claimed_at=now)
    if claimed != 1:
        return None
    return Delivery.objects.select_related("event__job__team").get(pk=delivery_id)


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
    overdue = now - STALE_CLAIM
    # A retry without retry_at was scheduled before retry_at was kept: judged by when it was made.
    retrying = Q(retry_at__lt=overdue) | Q(retry_at__isnull=True, created_at__lt=overdue)
    return Q(created_at__gte=now - STALE_NEWS) & (
        lost_claim(now) | Q(state=Delivery.State.PENDING, created_at__lt=overdue)
        | Q(retrying, state=Delivery.State.RETRYING))  # fmt: skip


def record(delivery: Delivery, *, error: Exception | None = None, final: bool = True,
           retry_in: float | None = None) -> None:
    """Writes how sending went: sent (with a note when its answer is unknown), retrying (with the
    error, due `retry_in` seconds from now), or failed."""
    delivery.retry_at = None
    if error is None or isinstance(error, AnswerUnknown):
        delivery.state, delivery.error, delivery.sent_at = Delivery.State.SENT, str(error or ""), timezone.now()
    else:
        delivery.state = Delivery.State.FAILED if final else Delivery.State.RETRYING
        delivery.error = str(error)[:2000]
        if not final:
            delivery.retry_at = timezone.now() + timedelta(seconds=retry_in or 0)
    delivery.save(update_fields=["state", "error", "sent_at", "retry_at"])


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
