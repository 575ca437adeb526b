"""REST API for the cluster as a whole: capacity, usage and the last admission cycle."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.selectors import cluster_summary
from tenants.auth import ApiDefaults
from tenants.serializers import TypedUsageSerializer, _usage


class TeamUsageSerializer(TypedUsageSerializer):
    team = serializers.CharField()


class TypeCapacitySerializer(serializers.Serializer):
    capacity = serializers.IntegerField(help_text="GPUs of this type on schedulable nodes.")
    used = serializers.IntegerField(help_text="GPUs of this type held by Gangway jobs, wherever they run.")
    in_use = serializers.IntegerField(help_text="Of `used`, the GPUs on schedulable nodes: what `capacity` is used by.")
    outside = serializers.IntegerField(help_text="GPUs of this type held by pods Gangway did not create.")
    free = serializers.IntegerField(help_text="`capacity` less `in_use` and `outside`.")
    unschedulable = serializers.IntegerField(
        help_text="GPUs of this type on nodes that take no new pods (cordoned, tainted): not in `capacity`.")
    unschedulable_used = serializers.IntegerField(help_text="Of those, the GPUs Gangway jobs still hold there.")


class CycleSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField()
    duration = serializers.FloatField(help_text="Seconds.")
    cluster_reachable = serializers.BooleanField()
    failed = serializers.BooleanField(help_text="The cycle raised; its decisions were rolled back.")
    error = serializers.SerializerMethodField(
        help_text="What went wrong, in words for anyone (operators find the detail in the admin and logs).")

    def get_error(self, cycle) -> str:
        if cycle.failed:
            return "The admission cycle failed; nothing it decided was kept."
        if not cycle.cluster_reachable:
            return "The cluster cannot be reached."
        return ""


class ClusterSerializer(serializers.Serializer):
    capacity = serializers.IntegerField(help_text="GPUs on schedulable nodes.")
    used = serializers.IntegerField(help_text="GPUs held by Gangway jobs, wherever they run (the teams' `used`).")
    in_use = serializers.IntegerField(help_text="Of `used`, the GPUs on schedulable nodes: what `capacity` is used by.")
    outside = serializers.IntegerField(help_text="GPUs held by pods Gangway did not create.")
    free = serializers.IntegerField(help_text="`capacity` less `in_use` and `outside`.")
    unschedulable = serializers.IntegerField(
        help_text="GPUs on nodes that take no new pods (cordoned, tainted): not in `capacity`.")
    unschedulable_used = serializers.IntegerField(
        help_text="Of those, the GPUs Gangway jobs still hold there (they run on through a drain).")
    reserved_idle = serializers.IntegerField(help_text="Nominal quota neither used nor lent.")
    teams = TeamUsageSerializer(many=True)
    last_cycle = CycleSerializer(allow_null=True)
    by_type = serializers.DictField(
        child=TypeCapacitySerializer(), required=False,
        help_text="On a cluster with GPU types: type name -> its GPUs, cheapest type first. Absent without types.")


class ClusterView(ApiDefaults, APIView):
    @extend_schema(
        summary="Cluster capacity and GPU usage per team", tags=["cluster"], responses=ClusterSerializer,
        examples=[OpenApiExample("Two teams", value={
            "capacity": 16, "used": 12, "in_use": 12, "outside": 0, "free": 4, "unschedulable": 0,
            "unschedulable_used": 0, "reserved_idle": 4,
            "teams": [{"team": "maps", "nominal": 8, "used": 12, "within": 8, "borrowed": 4, "lent": 0, "idle": 0,
                       "waiting": 0, "borrowing_limit": 8},
                      {"team": "vision", "nominal": 8, "used": 0, "within": 0, "borrowed": 0, "lent": 4, "idle": 4,
                       "waiting": 0, "borrowing_limit": 8}],
            "last_cycle": {"started_at": "2025-05-01T12:00:00Z", "duration": 0.04, "cluster_reachable": True,
                           "failed": False, "error": ""}})],
    )  # fmt: skip
    def get(self, request):
        summary = cluster_summary()
        cycle = summary.last_cycle
        data = {
            "capacity": summary.capacity, "used": summary.used, "in_use": summary.in_use, "outside": summary.outside,
            "free": summary.free, "unschedulable": summary.unschedulable,
            "unschedulable_used": summary.unschedulable_used, "reserved_idle": summary.reserved_idle,
            "teams": [{"team": team.slug, **_usage(team)} for team in summary.teams],
            "last_cycle": cycle,
        }  # fmt: skip
        if summary.by_type:
            data["by_type"] = {t.name: {"capacity": t.capacity, "used": t.used, "in_use": t.in_use, "outside": t.outside,
                                        "free": t.free, "unschedulable": t.unschedulable,
                                        "unschedulable_used": t.unschedulable_used}
                               for t in summary.by_type}  # fmt: skip
        return Response(ClusterSerializer(data).data)
