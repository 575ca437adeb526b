"""Who is told what about jobs, and every message sent: e-mail to people, a webhook per team."""

from __future__ import annotations

from typing import NamedTuple

from django.conf import settings
from django.db import models
from django.db.models import Q

from jobs.models import Job, JobEvent
from tenants.models import Team


class Moment(NamedTuple):
    """One moment of a job people may ask to hear of."""

    flag: str  # the Moments field that asks for it
    happened: str  # what happened to a job, in words: "was preempted"
    happened_to_several: str  # the same of several jobs, for a digest's headline: "were preempted"


# The moments a person may ask to be told about, by event kind. One registry, read by the receiver,
# the services, the messages and the forms.
MOMENTS = {
    JobEvent.Kind.RUNNING: Moment("on_start", "started", "started"),
    JobEvent.Kind.PREEMPTED: Moment("on_preempt", "was preempted", "were preempted"),
    JobEvent.Kind.FAILED: Moment("on_fail", "failed", "failed"),
    JobEvent.Kind.SUCCEEDED: Moment("on_success", "succeeded", "succeeded"),
}


class Moments(models.Model):
    """The four moments, as flags; failures are on by default, as people most want those."""

    on_start = models.BooleanField("Starts", default=False)
    on_preempt = models.BooleanField("Is preempted", default=False)
    on_fail = models.BooleanField("Fails", default=True)
    on_success = models.BooleanField("Succeeds", default=False)

    class Meta:
        abstract = True

    def wants(self, kind: str) -> bool:
        moment = MOMENTS.get(kind)
        return bool(moment and getattr(self, moment.flag))


class Subscription(Moments):
    """A person's e-mail for the jobs of one team, or (team empty) for their own jobs in any team."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="subscriptions")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="subscriptions",
                             help_text="Empty: the person's own jobs, whatever their team.")  # fmt: skip

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="subscription_once_per_team"),
            models.UniqueConstraint(fields=["user"], condition=Q(team__isnull=True), name="subscription_once_for_own_jobs"),
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.team or 'own jobs'}"


class TeamWebhook(Moments):
    """A team's Slack-compatible incoming webhook, set by a lead of the team."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"webhook of {self.team}"


class Delivery(models.Model):
    """One job event to tell one target, and how sending it went (every send is recorded). Deliveries to
    the same target waiting at the same time go out as one message, a digest; each keeps its own record."""

    class Channel(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        RETRYING = "retrying", "Retrying"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    event = models.ForeignKey(JobEvent, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=500, help_text="The e-mail address, or the webhook's URL.")
    # No index of its own: `delivery_to_person` starts with it, and serves every read by person (and the
    # SET NULL when a person is deleted) as well; a second index would only slow each write.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                             db_index=False, help_text="The person an e-mail is for.")  # fmt: skip
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When a worker last took it to send: a claim older than a "
                                                "send could take was lost with its worker, and is taken again.")  # fmt: skip
    # Also set on a pending delivery held for its receiver's retry (`batching.held_for_retry`): when it is due.
    retry_at = models.DateTimeField(null=True, blank=True,
                                    help_text="When its retry is due: one long overdue never reached the broker, "
                                              "and is sent again.")  # fmt: skip
    sent_at = models.DateTimeField(null=True, blank=True)
    digest_size = models.PositiveIntegerField(default=0, db_default=0,
                                              help_text="How many deliveries the message that last carried it "
                                                        "carried: 1 alone, more in a digest; 0 before it was tried.")  # fmt: skip

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            # A retried notify task finds the deliveries it made before instead of sending twice.
            models.UniqueConstraint(fields=["event", "channel", "target"], name="delivery_once_per_target"),
        ]
        indexes = [
            # `notify` asks, for each delivery it makes, whether another to the same receiver came just before
            # (`batching.gathering_wait`): one look in an index, however many deliveries were ever recorded.
            models.Index(fields=["target", "channel", "created_at"], name="delivery_to_receiver"),
            # The settings page's latest deliveries (`selectors.recent_deliveries`): a person's, newest first,
            # and the webhooks', newest first; beat's pruning reads the second from the oldest end.
            models.Index(fields=["user", "-created_at", "-id"], name="delivery_to_person"),
            models.Index(fields=["channel", "-created_at", "-id"], name="delivery_by_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.channel} to {self.target}: {self.state}"


class PendingEvent(models.Model):
    """A notable event whose notifications are still to be worked out: written with the event, in its
    transaction (kept or rolled back with it), and removed once `notify` has made its deliveries. One
    left over (the broker refused its task, or the worker died first) is enqueued again by
    `resend_lost`, so a broker that is down for a while delays notifications but loses none."""

    event = models.OneToOneField(JobEvent, on_delete=models.CASCADE, primary_key=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)


class TokenNotice(models.Model):
    """One notice to one person that an API token expires soon (`token_notices.py`): made once per token, notice
    and person (a second worker, or beat run again, makes none), claimed with a conditional UPDATE before it is
    sent, so that nobody is told twice, and recorded as it went."""

    class Kind(models.TextChoices):
        SOON = "soon", "Expires within 14 days"
        LAST_DAY = "last_day", "Expires within a day"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    token = models.ForeignKey("tenants.ApiToken", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When a worker took it to send: a claim older than a send could "
                                                "take was lost with its worker, and is taken again.")  # fmt: skip
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["token", "kind", "user"], name="token_notice_once_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} to {self.user}: {self.state}"
