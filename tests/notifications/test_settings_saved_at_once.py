"""A settings form saved twice at once (a double click; real PostgreSQL, one connection per save): one
subscription per scope and one webhook per team, and neither save fails."""

from __future__ import annotations

import pytest

from notifications.models import Subscription, TeamWebhook
from notifications.services import subscriptions_set, webhook_set
from tests.together import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_choices_saved_six_times_at_once_make_one_subscription_per_scope(maps, owner):
    def save() -> None:
        subscriptions_set(user=owner, choices={None: {"on_fail": True, "on_start": True}, maps: {"on_fail": True}})

    assert run_together(*[save] * 6, timeout=60) == []
    assert set(Subscription.objects.values_list("team__slug", "on_start")) == {("maps", False), (None, True)}
    assert Subscription.objects.count() == 2


def test_a_webhook_saved_six_times_at_once_is_one_webhook(maps, lead):
    def save() -> None:
        webhook_set(team=maps, url="https://hooks.example.com/maps", flags={"on_fail": True}, actor=lead)

    assert run_together(*[save] * 6, timeout=60) == []
    assert list(TeamWebhook.objects.values_list("team__slug", "url")) == [("maps", "https://hooks.example.com/maps")]
