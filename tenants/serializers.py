"""JSON shapes of teams, quotas, usage and API tokens for the REST API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tenants.inputs import QUOTA_MAX, WEIGHT_MAX, WEIGHT_MIN, quota_problem, text_problem
from tenants.limit_words import ALL_UNUSED, NO_LIMIT
from tenants.models import ApiToken, PriorityTier, Quota, base_resource, is_quota_resource
from tenants.selectors import quota_resources
from tenants.services import QUOTA_FIELDS
from tenants.tokens import LONGEST_LIFETIME, TOKEN_NAME, default_lifetime, lifetime_problem

BIG = max(QUOTA_MAX.values())  # the largest of any resource; each resource's own range is checked in validate_quotas


class QuotaSerializer(serializers.ModelSerializer):
    class Meta:
        model = Quota
        fields = ["resource", "nominal", "borrowing_limit", "lending_limit", "max_per_replica", "default_per_replica"]
        read_only_fields = fields


class UsageSerializer(serializers.Serializer):
    """A team's GPUs now, as the last admission cycle recorded them."""

    nominal = serializers.IntegerField()
    used = serializers.IntegerField(help_text="Held by its admitted and running jobs.")
    within = serializers.IntegerField(help_text="Of `used`, what lies within its nominal quota.")
    borrowed = serializers.IntegerField(help_text="Of `used`, what lies above its nominal quota.")
    lent = serializers.IntegerField(help_text="Of its unused nominal, what other teams use now.")
    idle = serializers.IntegerField(help_text="Nominal neither used nor lent.")
    waiting = serializers.IntegerField(help_text="Asked for by its queued jobs.")
    borrowing_limit = serializers.IntegerField(allow_null=True)


class TypedUsageSerializer(UsageSerializer):
    """A team's GPUs now, with its figures of each GPU type on a cluster with types."""

    by_type = serializers.DictField(
        child=UsageSerializer(), required=False,
        help_text="On a cluster with GPU types: type name -> the team's figures of that type, cheapest type "
                  "first; the figures above add them up (their borrowing limit too, null when a type has none). "
                  "Absent without types.",
    )  # fmt: skip


class TeamSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    weight = serializers.FloatField()
    role = serializers.CharField(allow_null=True, help_text="Your role in the team: member, lead, or null.")
    tiers = serializers.ListField(child=serializers.CharField(), help_text="Tiers its jobs may use.")
    default_tier = serializers.CharField(allow_null=True)
    quotas = QuotaSerializer(many=True)
    usage = serializers.DictField(child=TypedUsageSerializer(), help_text="Per resource; GPUs for now.")

    def to_representation(self, team):
        usage = self.context["usage"].get(team.slug)
        return {
            "slug": team.slug, "name": team.name, "weight": team.weight,
            "role": self.context["roles"].get(team.pk),
            "tiers": [tier.name for tier in team.tiers.all()],
            "default_tier": team.default_tier.name if team.default_tier else None,
            "quotas": QuotaSerializer(team.quotas.all(), many=True).data,
            "usage": {"gpu": _usage(usage)} if usage else {},
        }  # fmt: skip


def _usage(usage) -> dict:
    """A team's GPU figures as the API gives them; with `by_type` only on a cluster with GPU types."""
    figures = {
        "nominal": usage.nominal, "used": usage.used, "within": usage.within, "borrowed": usage.borrowed,
        "lent": usage.lent, "idle": usage.idle, "waiting": usage.waiting, "borrowing_limit": usage.borrowing_limit,
    }  # fmt: skip
    if usage.by_type:
        figures["by_type"] = {name: _usage(of_type) for name, of_type in usage.by_type.items()}
    return figures


class QuotaLimitsSerializer(serializers.Serializer):
    nominal = serializers.IntegerField(min_value=0, max_value=BIG, help_text="Guaranteed share.")
    borrowing_limit = serializers.IntegerField(
        min_value=0, max_value=BIG, allow_null=True, default=None, help_text=f"null = {NO_LIMIT}, 0 = never borrows."
    )
    lending_limit = serializers.IntegerField(
        min_value=0, max_value=BIG, allow_null=True, default=None, help_text=f"null = {ALL_UNUSED} nominal may be lent."
    )

    def validate(self, attrs):
        # A PATCH skips required fields at every level, but a resource's quota is given whole: without
        # its nominal there is nothing to store.
        if "nominal" not in attrs:
            raise serializers.ValidationError(
                {"nominal": ["Required: a resource's quota is set whole, nominal included (a limit left out is null)."]}
            )
        return attrs


def _limits_schema(high: int) -> dict:
    return {
        "type": "object", "nullable": True, "required": ["nominal"],
        "properties": {
            "nominal": {"type": "integer", "minimum": 0, "maximum": high},
            "borrowing_limit": {"type": "integer", "minimum": 0, "maximum": high, "nullable": True},
            "lending_limit": {"type": "integer", "minimum": 0, "maximum": high, "nullable": True},
        },
    }  # fmt: skip


# The keys are the cluster's resources when the request is made (gpu, or gpu:<type> per GPU type,
# then cpu and memory): a schema is fixed, so it names the three untyped ones and lets a key of a
# GPU type through with the GPU range; a key the cluster lacks is a 400 naming the known ones.
@extend_schema_field({
    "type": "object",
    "properties": {resource: _limits_schema(QUOTA_MAX[resource]) for resource in ("gpu", "cpu", "memory")},
    "additionalProperties": _limits_schema(QUOTA_MAX["gpu"]),
    "example": {"gpu:a100": {"nominal": 8, "borrowing_limit": 4, "lending_limit": None},
                "gpu:l4": {"nominal": 16, "borrowing_limit": None, "lending_limit": 8}},
})  # fmt: skip
class QuotasField(serializers.DictField):
    """Resource -> its limits, or null to drop the resource's quota."""


class QuotaBasisSerializer(serializers.Serializer):
    """The team's quotas (and weight) as the caller read them, which its change starts from."""

    weight = serializers.FloatField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX, required=False,
                                    help_text="Compared only when given.")  # fmt: skip
    quotas = QuotasField(
        child=QuotaLimitsSerializer(allow_null=True), required=False,
        help_text="Every quota the team had, resource -> limits as GET /teams/{slug}/ gave them: a resource "
                  "left out (or null) had none.",
    )  # fmt: skip

    def validate(self, attrs):
        if "quotas" not in attrs:  # a PATCH skips required fields at every level: said here
            raise serializers.ValidationError({"quotas": ["Required: every quota the team had when you read it."]})
        return attrs


def basis_figures(basis: dict) -> dict:
    """A validated `based_on` in `quota_values`' shape, for `QuotaAsRead`."""
    figures = {resource: {limit: limits.get(limit) for limit in QUOTA_FIELDS}
               for resource, limits in basis["quotas"].items() if limits is not None}  # fmt: skip
    return {"weight": basis["weight"], **figures} if "weight" in basis else figures


class QuotaUpdateSerializer(serializers.Serializer):
    """PUT replaces every quota (a resource left out loses its quota); PATCH changes the ones given."""

    weight = serializers.FloatField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX, required=False)
    quotas = QuotasField(
        child=QuotaLimitsSerializer(allow_null=True), required=False,
        help_text="Resource (gpu, or gpu:<type> per GPU type once the cluster has types; cpu in millicores, "
                  "memory in bytes) -> limits, or null to drop its quota.",
    )  # fmt: skip
    based_on = QuotaBasisSerializer(
        required=False,
        help_text="The quotas your change starts from, as you read them; when the stored ones differ (another "
                  "admin changed them since), nothing is saved and the answer is a 409 naming the change.",
    )  # fmt: skip

    def validate_quotas(self, quotas: dict) -> dict:
        known = quota_resources()
        # Dropping a quota (null) is allowed for any well-formed resource: a row left from before the
        # cluster had types (or from a type since deleted) can still be dropped.
        unknown = sorted(resource for resource, limits in quotas.items()
                         if resource not in known and (limits is not None or not is_quota_resource(resource)))
        if unknown:
            raise serializers.ValidationError(
                f"Unknown resource {', '.join(unknown)}; the resources are {', '.join(known)}."
            )
        problems = {
            f"{resource}.{limit}": [problem]
            for resource, limits in quotas.items() for limit, amount in (limits or {}).items()
            if (problem := quota_problem(base_resource(resource), amount))
        }  # fmt: skip
        if problems:
            raise serializers.ValidationError(problems)
        return quotas

    def validate(self, attrs):
        if not self.partial and "quotas" not in attrs:
            raise serializers.ValidationError({"quotas": ["Required with PUT (it replaces every quota); use PATCH to change some."]})
        return attrs


class WhatIfJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


class QuotaWhatIfSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    quiet = serializers.BooleanField(help_text="True when the change would move no job now.")
    preempted = WhatIfJobSerializer(many=True, help_text="Running jobs that would be preempted.")
    starting = WhatIfJobSerializer(many=True, help_text="Waiting jobs that would start.")
    rejected = WhatIfJobSerializer(many=True, help_text="Waiting jobs that could then never fit.")


def what_if_data(result) -> dict:
    def row(job, reason=""):
        return {"id": job.pk, "name": job.name, "team": job.team.slug, "reason": reason}

    return {
        "dry_run": True, "quiet": result.is_quiet,
        "preempted": [row(job, reason) for job, reason in result.preempted],
        "starting": [row(job) for job in result.starting],
        "rejected": [row(job, reason) for job, reason in result.rejected],
    }  # fmt: skip


class TokenSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    user = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    max_tier = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "team", "user", "max_tier", "prefix", "created_by", "created_at", "last_used_at",
                  "expires_at", "revoked_at"]  # fmt: skip
        read_only_fields = fields


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The token itself; shown this once, never again.")

    class Meta(TokenSerializer.Meta):
        fields = TokenSerializer.Meta.fields + ["token"]
        read_only_fields = fields


class StoredSlugField(serializers.SlugRelatedField):
    """A slug naming a row: text PostgreSQL cannot hold (NUL, a lone surrogate) is refused with a
    sentence before any query, as the query itself would fail."""

    def to_internal_value(self, data):
        if isinstance(data, str) and (problem := text_problem(data)):
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(TOKEN_NAME, max_length=100,
                                  help_text="What it is for, e.g. ci-main.")  # fmt: skip
    max_tier = StoredSlugField(
        slug_field="name", queryset=PriorityTier.objects.all(), required=False, allow_null=True,
        help_text="Team tokens: the highest tier it may submit to.",
    )  # fmt: skip
    expires_in_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=LONGEST_LIFETIME,
        help_text="Days until it expires; null never expires. Left out: TOKEN_MAX_LIFETIME's days, or never when "
        "that is 0. Refused above TOKEN_MAX_LIFETIME.",
    )  # fmt: skip

    def validate_expires_in_days(self, days: int | None) -> int | None:
        if problem := lifetime_problem(days):
            raise serializers.ValidationError(problem)
        return days

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        if "expires_in_days" not in values:
            values["expires_in_days"] = default_lifetime()
        return values
