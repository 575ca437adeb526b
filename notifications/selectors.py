"""Reads for the notification settings page."""

from __future__ import annotations

from django.db import connections
from django.db.models import Q, QuerySet

from notifications.models import Delivery, Subscription, TokenNotice
from tenants import permissions
from tenants.models import Team

NEWEST = ("-created_at", "-id")


def subscriptions_of(user) -> QuerySet[Subscription]:
    return Subscription.objects.filter(user=user)


def led_teams(user) -> QuerySet[Team]:
    """The teams whose webhook the user may set: those they lead (every team for staff)."""
    return permissions.led_teams(user).order_by("slug")


def recent_deliveries(user, limit: int = 20) -> QuerySet[Delivery]:
    """Returns the latest `limit` messages sent to the user, or to the webhooks of teams they lead, newest
    first, with their jobs and events; empty when none was sent.

    Read as the newest `limit` of each kind from its index, joined in one UNION: the person's
    (`delivery_to_person`), and the webhooks' (`delivery_by_channel`, each one's job read by its key for
    its team). Asked as one filter (the person's OR a led team's webhook), PostgreSQL could use neither
    index: it read every delivery and every job and sorted them, 60-130 ms at 205,000 jobs. The led
    teams are read first, as ids, so that the plan knows how many jobs they hold; a person who leads
    none reads their own only. SQLite, the demo's database, refuses a LIMIT inside a UNION's parts: there
    each kind's newest are an IN of their own.
    """
    kinds = [Delivery.objects.filter(user=user)]
    led = list(permissions.led_teams(user).values_list("pk", flat=True))
    if led:
        kinds.append(Delivery.objects.filter(channel=Delivery.Channel.WEBHOOK, job__team__in=led))
    first, *others = [kind.order_by(*NEWEST).values("pk")[:limit] for kind in kinds]
    if others and connections[first.db].features.supports_slicing_ordering_in_compound:
        latest = Q(pk__in=first.union(*others))
    else:
        latest = Q(pk__in=first)
        for other in others:
            latest |= Q(pk__in=other)
    return Delivery.objects.filter(latest).select_related("job", "event").order_by(*NEWEST)[:limit]


def recent_token_notices(user, limit: int = 20) -> QuerySet[TokenNotice]:
    """Returns the latest `limit` notices that an API token expires made for the user (`token_notices.py`), newest
    first, with their tokens and teams; empty when none was. Only the user's own: a team token's other people
    each have their own notice."""
    return TokenNotice.objects.filter(user=user).select_related("token__team").order_by(*NEWEST)[:limit]
