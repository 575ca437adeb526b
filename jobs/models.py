"""Training jobs and the events that tell their story."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from jobs import kinds, origins
from jobs.codes import Because
from tenants.models import DNS_LABEL, PriorityTier, Team, dns_label_validator
from tenants.selectors import sweep_tier


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    PREEMPTING = "preempting", "Preempting"
    CANCELLING = "cancelling", "Cancelling"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    REJECTED = "rejected", "Rejected"


def default_kind() -> str:
    return kinds.default().name


class Job(models.Model):
    State = JobState

    # States whose jobs hold (or are about to hold) cluster resources.
    ACTIVE_STATES = (State.ADMITTED, State.RUNNING)
    TERMINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED, State.REJECTED)
    # States of a job that has not ended: what reconcile follows in the cluster.
    OPEN_STATES = (State.QUEUED, State.ADMITTED, State.RUNNING, State.PREEMPTING, State.CANCELLING)
    # States of a job being stopped: its pods may still run (scheduling.snapshot.UNSTOPPED says when they count).
    STOPPING_STATES = (State.PREEMPTING, State.CANCELLING)

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    submitted_via = models.CharField(max_length=100, blank=True, help_text="Form, API token name, CLI, YAML.")
    name = models.CharField(max_length=50, validators=[dns_label_validator])
    # Choices read from the registry on each use: a new kind needs no migration.
    kind = models.CharField(max_length=40, choices=kinds.choices, default=default_kind)
    image = models.CharField(max_length=500)
    runtime = models.CharField(max_length=253, blank=True,
                               help_text="The runtime it runs on, for a kind that takes one (e.g. a ClusterTrainingRuntime).")
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    replicas = models.JSONField(
        help_text="Replica groups: [{role, count, gpu, cpu (millicores), memory (bytes, /dev/shm included)}]."
    )
    gpu_total = models.PositiveIntegerField(default=0, help_text="GPUs over all replicas.")
    tier = models.ForeignKey(PriorityTier, on_delete=models.PROTECT, related_name="jobs")
    max_runtime = models.PositiveIntegerField(null=True, blank=True, help_text="Seconds; activeDeadlineSeconds.")
    gpu_type = models.JSONField(
        default=list, blank=True,
        help_text="GPU types it accepts, in order of preference; empty = its team's types in the cluster's order.",
    )  # fmt: skip
    volumes = models.JSONField(
        default=list, blank=True,
        help_text="Claims and config maps of the team's namespace: [{claim | config_map, path, read_only}].",
    )  # fmt: skip
    shm = models.PositiveBigIntegerField(
        default=0, help_text="Bytes of a memory-backed /dev/shm per replica, included in each replica's memory."
    )
    idempotency_key = models.CharField(max_length=200, blank=True)
    spec_digest = models.CharField(max_length=64, blank=True, help_text="Hash of the submitted spec.")

    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED, db_index=True)
    submitted_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(help_text="Kept across requeues: a preempted job keeps its place.")
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    preemption_count = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=1, help_text="1, then +1 per requeue (GANGWAY_ATTEMPT).")
    not_before = models.DateTimeField(
        null=True, blank=True, help_text="Backoff after a stuck admission: not admitted again before this."
    )
    # A job being preempted whose stop the cluster failed (a server error, no refusal): it holds its room and
    # quota until the stop goes through (scheduling.refusals.stop_refused, scheduling.snapshot.UNSTOPPED). Of a
    # job being cancelled, when the cluster first refused or failed its stop (refusals.cancel_refused), which
    # `held_until_stopped` then keeps counted.
    stop_failed_at = models.DateTimeField(
        null=True, blank=True, help_text="Being preempted: when the cluster first failed to stop it (a server error). "
        "Being cancelled: when it first refused or failed to.",
    )
    # A job being cancelled whose pods may still run: cancelled while admitted or running, or while being preempted
    # with its stop refused or failed (a victim whose stop went through holds nothing: its room is another job's).
    # It holds its room and quota until reconcile has stopped it (scheduling.snapshot.UNSTOPPED).
    held_until_stopped = models.BooleanField(
        default=False, db_default=False,
        help_text="Being cancelled: its pods may still run, so it counts as running until stopped.",
    )
    # A running job some of whose replicas wait to start (a pod lost with its node and made again, which no node
    # takes): since when reconcile has seen it so. Still short ADMISSION_TIMEOUT later, it is evicted and
    # requeued (R13, scheduling.evictions); cleared once every replica runs again.
    short_since = models.DateTimeField(
        null=True, blank=True, help_text="Running: since when some of its replicas wait to start again.",
    )

    # Where it runs: one node name per replica, in replica-group order.
    placement = models.JSONField(default=list, blank=True)
    # The GPU type its last admission gave it ("" on a cluster without types, or before any admission).
    assigned_gpu_type = models.CharField(max_length=63, blank=True)
    # Why it waits, as the last admission cycle saw it.
    reason_code = models.CharField(max_length=40, blank=True)
    reason = models.TextField(blank=True)
    position = models.PositiveIntegerField(null=True, blank=True)
    team_position = models.PositiveIntegerField(null=True, blank=True)
    eta = models.DateTimeField(null=True, blank=True, help_text="Estimated start.")
    # R4: room reserved for it while it starves: {"start": ISO time, "placement": {node: replicas}}.
    reservation = models.JSONField(null=True, blank=True)
    # R8: when its training last reported a saved checkpoint (fewest unsaved work is preempted first).
    checkpointed_at = models.DateTimeField(null=True, blank=True)

    # Adopted jobs (created elsewhere: kubectl, Katib, Pipelines): the cluster object's own name and
    # uid. Empty for the jobs Gangway creates, whose names are deterministic (`cluster_name`).
    cluster_name = models.CharField(max_length=253, blank=True, help_text="Name of the adopted cluster object.")
    cluster_uid = models.CharField(max_length=36, blank=True, help_text="uid of the adopted cluster object.")
    sweep = models.ForeignKey("Sweep", on_delete=models.SET_NULL, null=True, blank=True, related_name="trials")

    # Simulated cluster only: how long it runs and whether it fails.
    sim_duration = models.PositiveIntegerField(null=True, blank=True)
    sim_fail = models.BooleanField(default=False)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            # Newest first, a page at a time, without sorting every job of a team or a person: a
            # team's (its page's polled list; the API's list of a team token, or of one team of a
            # person: selectors.ids_of) and a person's own (My jobs; the team comes last, after
            # the unique id so it orders nothing, for the page's count, which joins the person's
            # memberships by team, to be read from the index alone). No index of every job newest
            # first: PostgreSQL would take it for these reads too, and read past every newer job of
            # other teams before a quiet team's. tests/jobs/test_job_list_plans.py checks the plans.
            models.Index(fields=["team", "-submitted_at", "-id"], name="job_team_newest"),
            models.Index(fields=["owner", "-submitted_at", "-id", "team"], name="job_owner_newest"),
            models.Index(fields=["team", "state"]),
            models.Index(fields=["state", "queued_at"]),
            models.Index(fields=["state", "position"], name="job_queue_order"),  # the queue pages
            # R14: a group's latest successes, read at every cycle (scheduling.snapshot.latest_runs).
            models.Index(fields=["team", "kind", "gpu_total", "-finished_at"], condition=Q(state="succeeded"),
                         name="job_latest_successes"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="unique_idempotency_key_per_team",
            ),
            models.CheckConstraint(condition=Q(name__regex=DNS_LABEL), name="job_name_dns_label"),
            models.CheckConstraint(condition=Q(gpu_total__gte=0), name="job_gpu_total_non_negative"),
            models.CheckConstraint(condition=Q(state__in=JobState.values), name="job_known_state"),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="job_attempt_positive"),
            # One Gangway job per adopted object, however many reconciles see it.
            models.UniqueConstraint(fields=["cluster_uid"], condition=~Q(cluster_uid=""), name="unique_adopted_object"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL_STATES

    @property
    def cancellable(self) -> bool:
        """Whether a cancel still changes something: it has not ended and is not already stopping for one."""
        return not self.is_terminal and self.state != self.State.CANCELLING

    @property
    def short_reason(self) -> str:
        """Why a running job short of replicas may be evicted, and by when, as reconcile last said it (R13,
        `scheduling.evictions`); "" for any other job. The job page and the rows of jobs show it."""
        return self.reason if self.state == self.State.RUNNING and self.reason_code == Because.SHORT_OF_REPLICAS else ""

    @property
    def replica_count(self) -> int:
        return sum(group["count"] for group in self.replicas)

    @property
    def adopted(self) -> bool:
        """Created elsewhere and adopted: Gangway suspends and resumes it, never deletes it."""
        return bool(self.cluster_uid)

    @property
    def pipelines_run(self) -> str:
        """The Kubeflow Pipelines run that created this adopted job, "" for any other job: Pipelines creates its
        steps, so Gangway does not copy one (`services.PipelinesStep`)."""
        return origins.pipelines_run(self.submitted_via) if self.adopted else ""

    @property
    def is_trial(self) -> bool:
        """A trial of a Katib sweep: Katib creates and stops it, so Gangway neither cancels nor copies it
        (`services.KatibTrial`)."""
        return self.sweep_id is not None

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("jobs:detail", args=[self.pk])


class Sweep(models.Model):
    """The trials of one Katib experiment in a team: one row on the queue, and a cap on the GPUs
    its trials hold at once (trials beyond it wait), so a sweep cannot take the cluster.

    The cap and the tier of trials that name none are the team's (`sweep_gpu_cap`, `sweep_tier`),
    read when they apply: a row keeps no copy, so a change to the team reaches its open sweeps at
    the next cycle, and an experiment created again under the same name gets the team's figures.
    """

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="sweeps")
    experiment = models.CharField(max_length=253, help_text="The Katib experiment's name.")
    objective = models.CharField(max_length=100, blank=True, help_text="The metric Katib optimizes.")
    maximize = models.BooleanField(default=True)
    best_objective = models.FloatField(null=True, blank=True, help_text="Best value a trial reported.")

    class Ending(models.TextChoices):
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    # How and when its Katib experiment ended, and its best trial (Katib's currentOptimalTrial) with that trial's
    # metrics, [name, value] the objective first: learned by reconcile once the Experiment reports them. Each has a
    # database default (or takes NULL), so that code from before them still inserts sweeps while they migrate.
    ended = models.CharField(max_length=12, blank=True, db_default="", default="", choices=Ending.choices,
                             help_text="How its experiment ended.")  # fmt: skip
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When its experiment ended, as Katib says.")
    best_trial = models.CharField(max_length=253, blank=True, db_default="", default="",
                                  help_text="Katib's best trial: its job's name.")  # fmt: skip
    best_metrics = models.JSONField(default=list, null=True, blank=True,
                                    help_text="The best trial's metrics: [name, value]; NULL when none was learned.")
    created_at = models.DateTimeField(auto_now_add=True)
    # What the queue shows of it changes outside any cycle (reconcile learns the objective): the
    # polled parts' version moves with this (scheduling.selectors.live_version).
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["team", "experiment"]
        constraints = [models.UniqueConstraint(fields=["team", "experiment"], name="unique_sweep_per_team")]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.experiment}"

    @property
    def gpu_cap(self) -> int:
        """The most GPUs its trials hold at once: its team's sweep GPU cap as it is now."""
        return self.team.sweep_gpu_cap

    @property
    def tier(self) -> PriorityTier | None:
        """The tier of its trials that name none: its team's sweep tier as it is now (`sweep_tier`)."""
        return sweep_tier(self.team)


class JobEvent(models.Model):
    """One transition or decision in a job's life, with a sentence for a person."""

    class Kind(models.TextChoices):
        SUBMITTED = "submitted", "Submitted"
        ADMITTED = "admitted", "Admitted"
        RUNNING = "running", "Running"
        PREEMPTED = "preempted", "Preempted"
        REQUEUED = "requeued", "Requeued"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCEL_REQUESTED = "cancel_requested", "Cancel requested"
        CANCELLED = "cancelled", "Cancelled"
        REJECTED = "rejected", "Rejected"
        WAITING = "waiting", "Waiting"
        EVICTED = "evicted", "Evicted"
        NOTE = "note", "Note"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    from_state = models.CharField(max_length=12, blank=True)
    to_state = models.CharField(max_length=12, blank=True)
    message = models.TextField()
    code = models.CharField(max_length=40, blank=True, help_text="Stable reason code, e.g. the rule.")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            # /metrics counts the decisions (admissions, preemptions, evictions, rejections) per team and
            # reason at every scrape (portal.metrics._decisions): read from this index alone, never by
            # scanning every event ever written. The kinds are those counters' kinds (a counter of another
            # kind would scan the events again: tests/deploy/test_metrics_plans.py fails on it).
            models.Index(fields=["kind", "job", "code"], name="jobevent_decisions",
                         condition=Q(kind__in=["admitted", "preempted", "evicted", "rejected"])),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.kind}: {self.message}"

