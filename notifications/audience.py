"""Who hears about a job event: the deliveries an event calls for (each subscribed person who may still see the
job, the team's webhook), and whether a delivery made earlier is still wanted when it is tried again."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q

from jobs.models import JobEvent
from notifications.models import MOMENTS, Delivery, Subscription, TeamWebhook
from notifications.outcomes import SendFailed, record
from tenants.permissions import viewers_of


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


def why_not_wanted(delivery: Delivery) -> str:
    """Why a delivery made earlier must not go out now ("" when it still should): its person left the
    job's team or unsubscribed, or the team's webhook was changed or removed. A send comes up to a quarter
    of an hour after the event (a retry, or news held for its receiver's retry); it never tells someone
    who may no longer see the job, nor posts to a webhook address the team gave up."""
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


def still_wanted(digest: list[Delivery]) -> list[Delivery]:
    """The deliveries of a claimed digest that may go out: each one no longer wanted (`why_not_wanted`) is
    recorded failed, saying why, and left out.

    Every delivery is asked, not only a retry: a first send waits too, for a burst to gather
    (NOTIFY_BATCH_SECONDS) or for its receiver's retry (up to a quarter of an hour), and whoever
    unsubscribed, left the team or moved its webhook meanwhile is not sent what was gathered for them.
    Asked once per job team, owner, moment and person: a digest of 200 trials of one sweep asks once.
    """
    wanted, answers = [], {}
    for delivery in digest:
        job = delivery.event.job
        key = (job.team_id, job.owner_id, delivery.event.kind, delivery.user_id)
        if key not in answers:
            answers[key] = why_not_wanted(delivery)
        unwanted = answers[key]
        if unwanted:
            record([delivery], error=SendFailed(unwanted, retry=False), final=True, digest_size=None)
        else:
            wanted.append(delivery)
    return wanted
