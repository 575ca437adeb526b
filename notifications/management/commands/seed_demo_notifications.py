"""The demo's notifications: each of seed_demo's people hears of every moment of their own jobs, by e-mail to
their address at example.com, which the demo writes to the worker's log; safe to rerun.

seed_demo (scheduling) cannot make subscriptions, which are this app's; deploy/demo.sh runs this after it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from notifications import services
from notifications.models import MOMENTS, Subscription
from scheduling.management.commands.seed_demo import USERS

# Django's backends that keep mail on this machine: the console (the demo's), a list in memory, files, nowhere.
LOCAL_MAIL = {f"django.core.mail.backends.{name}.EmailBackend" for name in ("console", "locmem", "filebased", "dummy")}


class Command(BaseCommand):
    help = ("Let the demo's people (seed_demo's) hear of every moment of their own jobs by e-mail, which stays on "
            "this machine; a person who already chose keeps their choice. Safe to rerun.")  # fmt: skip

    def handle(self, *args, **options):
        if settings.CLUSTER_BACKEND != "simulated":
            raise CommandError(f"seed_demo_notifications is for the demo, on the simulated cluster only; CLUSTER_BACKEND "
                               f"is {settings.CLUSTER_BACKEND}.")  # fmt: skip
        if settings.EMAIL_BACKEND not in LOCAL_MAIL:
            raise CommandError(f"The demo's mail must stay on this machine, but EMAIL_BACKEND is {settings.EMAIL_BACKEND}; "
                               "set it to django.core.mail.backends.console.EmailBackend, as deploy/demo.sh does.")  # fmt: skip
        people = get_user_model().objects.filter(username__in=[username for username, *_ in USERS]).exclude(email="")
        chosen = set(Subscription.objects.filter(user__in=people).values_list("user", flat=True))
        every_moment = {moment.flag: True for moment in MOMENTS.values()}
        told = [person for person in people.order_by("username") if person.pk not in chosen]
        for person in told:
            services.subscriptions_set(user=person, choices={None: every_moment})
        names = ", ".join(person.username for person in told) or "nobody new"
        self.stdout.write(f"Demo notifications: {names} told of their own jobs by e-mail ({len(told)} subscribed); "
                          f"the mail is written by {settings.EMAIL_BACKEND}.")  # fmt: skip
