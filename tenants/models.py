"""Teams, their members, quotas and the priority tiers they may use."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from scheduling.policy.types import type_of_key, typed_key
from tenants.inputs import quota_problem, weight_problem
from tenants.limit_words import ALL_UNUSED, NO_LIMIT
from tenants.roles import Role

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
dns_label_validator = RegexValidator(
    DNS_LABEL,
    "Use lowercase letters, digits and '-', starting and ending with a letter or digit "
    "(a Kubernetes DNS-1123 label).",
)


class Resource(models.TextChoices):
    GPU = "gpu", "GPUs"
    CPU = "cpu", "CPU (millicores)"
    MEMORY = "memory", "Memory (bytes)"


# A quota's resource: gpu, cpu, memory, or the GPUs of one type, `gpu:<type>` (see GpuType).
QUOTA_RESOURCE = r"^(gpu|cpu|memory|gpu:[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
GPU_TYPE_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA's GPU Feature Discovery


def is_quota_resource(resource: str) -> bool:
    """Whether `resource` is a well-formed quota resource (gpu, cpu, memory or gpu:<type>), known or not."""
    return len(resource) <= 67 and re.fullmatch(QUOTA_RESOURCE, resource) is not None


def base_resource(resource: str) -> str:
    """The resource a quota key counts: "gpu" for "gpu:a100", else the key itself."""
    return Resource.GPU if type_of_key(resource) is not None else resource


class GpuType(models.Model):
    """A model of GPU (Kueue's flavor): the nodes whose `label` has `value` hold GPUs of this type.

    With no GpuType the cluster's GPUs are of one kind and quotas name `gpu`;
    with types, GPU quota is per type (`gpu:<name>`) and jobs may ask for types.
    """

    name = models.CharField(max_length=63, unique=True, validators=[dns_label_validator],
                            help_text="What teams and jobs call it: a100, h100, l4.")  # fmt: skip
    label = models.CharField(max_length=253, default=GPU_TYPE_LABEL,
                             help_text="The node label that tells a node's GPU model.")  # fmt: skip
    value = models.CharField(max_length=63, help_text="The label's value on nodes of this type, e.g. NVIDIA-A100-SXM4-80GB.")
    order = models.PositiveIntegerField(default=0, help_text="Lower first: the order jobs that name no type try types in "
                                                             "(cheapest first).")  # fmt: skip
    description = models.CharField(max_length=200, blank=True, help_text="What it offers: memory, speed.")

    class Meta:
        ordering = ["order", "name"]
        verbose_name = "GPU type"
        constraints = [
            models.CheckConstraint(condition=Q(name__regex=DNS_LABEL), name="gpu_type_name_dns_label"),
            models.UniqueConstraint(fields=["label", "value"], name="one_gpu_type_per_label_value"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def resource(self) -> str:
        """Its quota resource: "gpu:a100"."""
        return typed_key(self.name)


class PriorityTier(models.Model):
    """A priority level; maps to a Kubernetes PriorityClass of the same name."""

    name = models.CharField(max_length=63, unique=True, validators=[dns_label_validator])
    value = models.IntegerField(help_text="Higher values are admitted first.")
    preemptible = models.BooleanField(
        default=True, help_text="Jobs of this tier may be preempted (and may run on borrowed quota)."
    )
    grace_period = models.PositiveIntegerField(
        default=30,
        help_text="Seconds a preempted job's pods get to save a checkpoint (terminationGracePeriodSeconds).",
    )
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-value", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(name__regex=DNS_LABEL), name="tier_name_dns_label"),
        ]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    """A tenant: its slug is also its Kubernetes namespace and Volcano queue."""

    slug = models.CharField(
        max_length=63,
        unique=True,
        validators=[dns_label_validator],
        help_text="Kubernetes namespace and Volcano queue name; fixed once the team exists.",
    )
    name = models.CharField(max_length=100)
    weight = models.FloatField(
        default=1.0, validators=[MinValueValidator(0.01)], help_text="Share weight for fair borrowing."
    )
    tiers = models.ManyToManyField(PriorityTier, related_name="teams", blank=True, help_text="Tiers it may use.")
    default_tier = models.ForeignKey(
        PriorityTier, on_delete=models.PROTECT, related_name="default_for", null=True, blank=True
    )
    checkpoint_claim = models.CharField(
        max_length=63,
        blank=True,
        validators=[dns_label_validator],
        help_text="PersistentVolumeClaim mounted at /checkpoint in every pod, if set.",
    )
    # Katib sweeps: the tier their trials get unless they name one (empty = the team's lowest: search low,
    # final training high), and the most GPUs one sweep's trials hold at once.
    sweep_tier = models.ForeignKey(
        PriorityTier, on_delete=models.SET_NULL, related_name="sweep_default_for", null=True, blank=True,
        help_text="Tier of Katib trials that name none; empty = the team's lowest tier.",
    )  # fmt: skip
    sweep_gpu_cap = models.PositiveIntegerField(default=8, help_text="Most GPUs one Katib sweep holds at once.")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(slug__regex=DNS_LABEL), name="team_slug_dns_label"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="team_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        """The admin's check of the weight: the same range as the quota page and the API."""
        problem = weight_problem(self.weight) if self.weight is not None else ""
        if problem:
            raise ValidationError({"weight": problem})


class Membership(models.Model):
    Role = Role

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Quota(models.Model):
    """A team's quota for one resource. A resource with no row is not limited by quota.

    GPUs are counted in cards, CPU in millicores and memory in bytes.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    resource = models.CharField(max_length=67, help_text="gpu, cpu, memory, or gpu:<type> for one GPU type.")
    nominal = models.BigIntegerField(help_text="Guaranteed share.")
    borrowing_limit = models.BigIntegerField(
        null=True, blank=True, help_text=f"How far above nominal the team may go; empty = {NO_LIMIT}, 0 = never."
    )
    lending_limit = models.BigIntegerField(
        null=True, blank=True, help_text=f"How much unused nominal others may borrow; empty = {ALL_UNUSED}."
    )
    max_per_replica = models.BigIntegerField(
        null=True, blank=True, help_text=f"Most one replica may ask for (LimitRange max); empty = {NO_LIMIT}."
    )
    default_per_replica = models.BigIntegerField(
        null=True, blank=True, help_text="What a replica gets when it asks for nothing (LimitRange default)."
    )

    class Meta:
        ordering = ["team__slug", "resource"]
        constraints = [
            models.UniqueConstraint(fields=["team", "resource"], name="one_quota_per_team_resource"),
            models.CheckConstraint(condition=Q(resource__regex=QUOTA_RESOURCE), name="quota_known_resource"),
            models.CheckConstraint(condition=Q(nominal__gte=0), name="quota_nominal_non_negative"),
            models.CheckConstraint(
                condition=Q(borrowing_limit__isnull=True) | Q(borrowing_limit__gte=0),
                name="quota_borrowing_limit_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(lending_limit__isnull=True) | Q(lending_limit__gte=0),
                name="quota_lending_limit_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(max_per_replica__isnull=True) | Q(max_per_replica__gte=0),
                name="quota_max_per_replica_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(default_per_replica__isnull=True) | Q(default_per_replica__gte=0),
                name="quota_default_per_replica_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.resource}: {self.nominal}"

    def clean(self) -> None:
        """The admin's check of the amounts: each within the resource's range, as on the quota page and the API."""
        if not re.match(QUOTA_RESOURCE, self.resource or ""):
            return
        fields = ("nominal", "borrowing_limit", "lending_limit", "max_per_replica", "default_per_replica")
        problems = {field: quota_problem(base_resource(self.resource), getattr(self, field)) for field in fields}
        problems = {field: problem for field, problem in problems.items() if problem}
        if problems:
            raise ValidationError(problems)


class AuditEntry(models.Model):
    """Who changed what on a team's settings, with the values before and after."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    # A deleted team's entries stay, the deletion's own among them (each summary names the team).
    team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit")
    subject = models.CharField(max_length=40, help_text="What changed: quota, tier, membership, token.")
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    summary = models.TextField()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return self.summary


class ApiToken(models.Model):
    """A bearer token for the REST API, stored as the SHA-256 of its value (shown once).

    A team token (team set, no user) acts for one team and, with `max_tier`,
    submits up to that tier; a user token (user set, no team) acts as its user.
    """

    PREFIX = "gw_"

    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'ci-main'.")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens"
    )
    max_tier = models.ForeignKey(
        PriorityTier, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="Highest tier a team token may submit to; empty = any tier its team may use.",
    )  # fmt: skip  (a tier capping a token in use is not deleted: PriorityTierAdmin.get_deleted_objects)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    prefix = models.CharField(max_length=12, help_text="The token's first characters, to recognise it.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="From then on it no longer authenticates; empty = never expires.")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(team__isnull=False, user__isnull=True) | Q(team__isnull=True, user__isnull=False),
                name="api_token_team_or_user",
            ),
        ]

    def __str__(self) -> str:
        owner = f"team {self.team}" if self.team_id else f"user {self.user}"
        return f"{self.name} ({self.prefix}..., {owner})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        """Whether it authenticates: neither revoked nor expired (its user's account aside)."""
        return not self.is_revoked and not self.is_expired
