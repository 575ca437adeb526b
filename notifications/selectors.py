"""Reads for the notification settings page."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from notifications.models import Delivery, Subscription
from tenants import permissions
from tenants.models import Team


def subscriptions_of(user) -> QuerySet[Subscription]:
    return Subscription.objects.filter(user=user)


def led_teams(user) -> QuerySet[Team]:
    """The teams whose webhook the user may set: those they lead (every team for staff)."""
    return permissions.led_teams(user).order_by("slug")


def recent_deliveries(user, limit: int = 20) -> QuerySet[Delivery]:
    """The latest messages sent to the user, or to the webhooks of teams they lead."""
    return (
        Delivery.objects.filter(Q(user=user) | Q(channel=Delivery.Channel.WEBHOOK, job__team__in=led_teams(user)))
        .select_related("job", "event")
        .order_by("-created_at", "-id")[:limit]
    )
