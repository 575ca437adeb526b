"""What a person and a team lead choose to hear, as the notifications pages save it: a person's subscriptions,
a team's webhook. Who hears about an event is `audience.py`; sending it, `sending.py` and the modules it names."""

from __future__ import annotations

from django.db import transaction

from notifications.models import Subscription, TeamWebhook


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
