"""JSON shapes of jobs and their events for the REST API (read side; writes go through services)."""

from __future__ import annotations

import copy
from datetime import datetime

from django.urls import NoReverseMatch, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs import kinds
from jobs.models import Job, JobEvent
from core.quantities import QUANTITY_PATTERN, format_cpu, format_memory
from jobs.spec import ENV_NAME_RE, IMAGE_RE, MAX_GPU_TYPES, MAX_LIST, MAX_STRING
from tenants.inputs import MAX_GPU_PER_REPLICA, MAX_REPLICAS, MAX_RUNTIME
from tenants.models import DNS_LABEL


class ReplicaGroupSerializer(serializers.Serializer):
    role = serializers.CharField()
    count = serializers.IntegerField()
    gpu = serializers.IntegerField()
    cpu = serializers.CharField(help_text="Kubernetes quantity; empty = the team's default.")
    memory = serializers.CharField(help_text="Kubernetes quantity, /dev/shm included; empty = the team's default.")

    def to_representation(self, group):
        return {
            "role": group["role"], "count": group["count"], "gpu": group.get("gpu", 0),
            "cpu": format_cpu(group["cpu"]) if group.get("cpu") else "",
            "memory": format_memory(group["memory"]) if group.get("memory") else "",
        }  # fmt: skip


OBJECT_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a Kubernetes object name (DNS-1123 subdomain)


class VolumeSerializer(serializers.Serializer):
    claim = serializers.CharField(required=False, help_text="A PersistentVolumeClaim of the team's namespace.")
    config_map = serializers.CharField(required=False, help_text="A ConfigMap of the team's namespace (read-only).")
    path = serializers.CharField(help_text="Absolute mount path in every replica, e.g. /data.")
    read_only = serializers.BooleanField(required=False, default=False, help_text="Claims only; config maps are read-only.")

    def to_representation(self, volume):
        return dict(volume)  # stored in the spec's shape already


class StoredDateTimeField(serializers.DateTimeField):
    """A time kept as ISO 8601 text in a JSON column (a reservation's start), written as DRF writes
    every other time of the job (`...Z`). DRF passes text through as it is, which gave `+00:00`."""

    def to_representation(self, value):
        return super().to_representation(datetime.fromisoformat(value) if isinstance(value, str) else value)


class ReservationSerializer(serializers.Serializer):
    start = StoredDateTimeField()
    placement = serializers.DictField(child=serializers.IntegerField(), help_text="Node -> replicas.")


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    web_url = serializers.SerializerMethodField()
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    tier = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    replicas = ReplicaGroupSerializer(many=True, read_only=True)
    env = serializers.DictField(child=serializers.CharField(), read_only=True)
    command = serializers.ListField(child=serializers.CharField(), read_only=True)
    args = serializers.ListField(child=serializers.CharField(), read_only=True)
    placement = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="The node of each replica while it runs."
    )
    position = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="1-based rank among all waiting jobs; null unless queued."
    )
    team_position = serializers.IntegerField(read_only=True, allow_null=True, help_text="Rank within its team.")
    eta = serializers.DateTimeField(read_only=True, allow_null=True, help_text="Estimated start; null when unknown.")
    reason = serializers.CharField(read_only=True, help_text="Why it waits, or what happened last, in one sentence.")
    volumes = VolumeSerializer(many=True, read_only=True)
    shm = serializers.SerializerMethodField(help_text="Size of the memory-backed /dev/shm; empty for the default.")
    reservation = ReservationSerializer(read_only=True, allow_null=True, help_text=(
        "Room reserved for it while it starves (R4): when it starts and how many replicas on each node; null "
        "when it holds none."))  # fmt: skip
    checkpointed_at = serializers.DateTimeField(read_only=True, allow_null=True,
                                                help_text="When its training last reported a saved checkpoint.")
    gpu_type = serializers.ListField(child=serializers.CharField(), read_only=True, help_text=(
        "The GPU types it accepts, in order of preference, as asked; empty: its team's types, cheapest first."))
    assigned_gpu_type = serializers.CharField(read_only=True, help_text=(
        "The GPU type its last admission gave it; empty before any admission or on a cluster without types."))

    class Meta:
        model = Job
        fields = [
            "id", "url", "web_url", "team", "name", "kind", "runtime", "state", "reason", "reason_code", "position",
            "team_position", "eta", "tier", "owner", "submitted_via", "image", "command", "args", "env",
            "replicas", "volumes", "shm", "gpu_total", "gpu_type", "assigned_gpu_type", "max_runtime", "idempotency_key",
            "placement", "preemption_count", "attempt",
            "submitted_at", "queued_at", "admitted_at", "started_at", "finished_at", "updated_at", "reservation",
            "checkpointed_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_fields(self):
        """Shallow copies of the fields built for the first job shown by this class.

        ModelSerializer otherwise maps every model field to a serializer field
        again for each instance, which costs more than showing the job; the
        mapping depends on the class alone. Copies, since fields are bound to
        the serializer that uses them; shallow ones, since every field here is
        read-only and binding sets attributes on the copy alone (a deep copy
        built each field and its children anew, half of showing a job). The
        children of list fields stay shared: they only turn values into text.
        """
        template = type(self).__dict__.get("_field_template")
        if template is None:
            template = super().get_fields()
            type(self)._field_template = template
        return {name: copy.copy(field) for name, field in template.items()}

    def get_shm(self, job: Job) -> str:
        return format_memory(job.shm) if job.shm else ""

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, job: Job) -> str:
        path = reverse("api:job-detail", args=[job.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    @extend_schema_field({"type": "string", "format": "uri", "nullable": True})
    def get_web_url(self, job: Job) -> str | None:
        """The job's page in the portal, when the portal serves one."""
        try:
            path = job.get_absolute_url()
        except NoReverseMatch:
            return None
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class SubmittedJobSerializer(JobSerializer):
    unsupported = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="Manifest fields Gangway did not carry over (empty for Gangway's own spec).",
    )  # fmt: skip

    class Meta(JobSerializer.Meta):
        fields = JobSerializer.Meta.fields + ["unsupported"]
        read_only_fields = fields


class JobEventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = JobEvent
        fields = ["id", "at", "kind", "from_state", "to_state", "message", "code", "actor"]
        read_only_fields = fields


def quantity(help_text: str) -> serializers.RegexField:
    """An optional Kubernetes quantity of the job spec, its grammar in the schema (its pattern), so a client
    built from the schema sends none the submission refuses as no quantity. Its range is the spec's to check."""
    return serializers.RegexField(QUANTITY_PATTERN, required=False, help_text=help_text)


class ReplicaInputSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=(), default="Worker", help_text="One of the kind's roles.")
    count = serializers.IntegerField(min_value=1, max_value=MAX_REPLICAS, default=1)
    gpu = serializers.IntegerField(min_value=0, max_value=MAX_GPU_PER_REPLICA, default=0)
    cpu = quantity('Kubernetes quantity, e.g. "2" or "500m".')
    memory = quantity('Kubernetes quantity, e.g. "4Gi".')

    def get_fields(self):
        """The fields, with every kind's roles read from the registry now (a kind registered later is known)."""
        fields = super().get_fields()
        fields["role"].choices = [(role, role) for role in kinds.all_roles()]
        return fields


class NodeResourcesSerializer(serializers.Serializer):
    gpu = serializers.IntegerField(min_value=0, max_value=MAX_GPU_PER_REPLICA, required=False)
    cpu = quantity('Kubernetes quantity, e.g. "8".')
    memory = quantity('Kubernetes quantity, e.g. "64Gi".')


class VolumeInputSerializer(serializers.Serializer):
    """A volume as the spec takes it (documented for the schema; `jobs.volumes` checks it)."""

    claim = serializers.RegexField(OBJECT_NAME, max_length=253, required=False,
                                   help_text="A PersistentVolumeClaim of the team's namespace.")  # fmt: skip
    config_map = serializers.RegexField(OBJECT_NAME, max_length=253, required=False,
                                        help_text="A ConfigMap of the team's namespace (always read-only).")  # fmt: skip
    path = serializers.RegexField(r"^/[A-Za-z0-9_./-]*$", max_length=255, help_text="Absolute mount path, e.g. /data.")
    read_only = serializers.BooleanField(required=False, default=False)


class SimulateSerializer(serializers.Serializer):
    duration = serializers.IntegerField(min_value=1, max_value=MAX_RUNTIME, required=False,
                                        help_text="Seconds it runs (simulated cluster).")
    fail = serializers.BooleanField(required=False, help_text="End as failed (simulated cluster).")


@extend_schema_field({
    "type": "object", "maxProperties": MAX_LIST,
    "propertyNames": {"pattern": "^(?!GANGWAY_)" + ENV_NAME_RE.pattern.lstrip("^")},
    "additionalProperties": {"type": "string", "maxLength": MAX_STRING},
})  # fmt: skip
class EnvField(serializers.DictField):
    """NAME: value pairs; names are letters, digits and '_', not starting with a digit or GANGWAY_."""


GPU_TYPE_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}


@extend_schema_field({"oneOf": [
    GPU_TYPE_NAME,
    {"type": "array", "items": GPU_TYPE_NAME, "maxItems": MAX_GPU_TYPES, "uniqueItems": True},
]})  # fmt: skip
class GpuTypeField(serializers.JSONField):
    """One GPU type name, or a list of distinct names in order of preference."""


class JobSpecSerializer(serializers.Serializer):
    """The job spec, documented for the schema; validation itself is `jobs.spec.parse_spec`'s."""

    team = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63, required=False,
                                  help_text="Team slug; may come from ?team= or a team token instead.")
    name = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=50)
    kind = serializers.ChoiceField(choices=(), required=False, help_text="The job kind; the first of these when left out.")
    image = serializers.RegexField(IMAGE_RE.pattern, max_length=500, help_text="An OCI image reference.")
    command = serializers.ListField(child=serializers.CharField(), required=False)
    args = serializers.ListField(child=serializers.CharField(), required=False)
    env = EnvField(child=serializers.CharField(), required=False)
    tier = serializers.RegexField(DNS_LABEL, required=False, allow_blank=True,
                                  help_text="Priority tier; empty = the team's default.")
    max_runtime = serializers.IntegerField(min_value=1, max_value=MAX_RUNTIME, required=False, allow_null=True)
    runtime = serializers.RegexField(OBJECT_NAME, max_length=253, required=False,
                                     help_text="What the job runs on, for a kind that takes a runtime "
                                     "(e.g. a ClusterTrainingRuntime).")  # fmt: skip
    replicas = serializers.ListField(child=ReplicaInputSerializer(), min_length=1, required=False,
                                     help_text="At most one group per role of the kind; required unless "
                                     "num_nodes is given.")  # fmt: skip
    num_nodes = serializers.IntegerField(min_value=1, max_value=MAX_REPLICAS, required=False,
                                         help_text="For a kind of identical nodes: how many, instead of "
                                         "replicas.")  # fmt: skip
    resources_per_node = NodeResourcesSerializer(required=False, help_text="With num_nodes: what each node asks.")
    volumes = VolumeInputSerializer(many=True, required=False,
                                    help_text="Exactly one of claim or config_map each, at distinct paths.")  # fmt: skip
    shm = quantity('Memory-backed /dev/shm per replica, e.g. "16Gi"; added to each replica\'s memory.')
    simulate = SimulateSerializer(required=False)
    gpu_type = GpuTypeField(required=False, help_text=(
        "The GPU types it accepts: one name, or a list in order of preference (the first where it fits now "
        "wins); left out, its team's types, cheapest first. Only for a job that asks for GPUs, and only "
        "types the cluster has."))

    def get_fields(self):
        """The fields, with the kinds read from the registry now (a kind registered later is offered)."""
        fields = super().get_fields()
        fields["kind"].choices = kinds.choices()
        return fields


def query_text(help_text: str) -> serializers.RegexField:
    """A text query parameter, optional. A null character is refused (400), as DRF refuses it in any text and
    PostgreSQL could not compare it, and the schema says so (its pattern), so a client built from the schema
    never sends one."""
    return serializers.RegexField(r"^[^\x00]*$", required=False, help_text=help_text,
                                  error_messages={"invalid": "Null characters are not allowed."})  # fmt: skip


class JobFilterSerializer(serializers.Serializer):
    """Query parameters of the job list."""

    team = query_text("Team slug, or several separated by commas; a team you cannot see is a 400 naming those "
                      "you can.")
    state = serializers.MultipleChoiceField(choices=Job.State.choices, required=False,
                                            help_text="One state, or several separated by commas.")  # fmt: skip
    tier = query_text("Tier name.")
    owner = query_text("Username of the submitter; a username no one has lists no jobs (a 400 would tell who has "
                       "an account).")
    gpu_type = serializers.RegexField(GPU_TYPE_NAME["pattern"], max_length=63, required=False,
                                      help_text="The GPU type its admission gave it, e.g. a100.")  # fmt: skip

    def to_internal_value(self, data):
        data = data.copy()
        if "state" in data:
            data.setlist("state", [s for value in data.getlist("state") for s in value.split(",") if s])
        return super().to_internal_value(data)


class QueueFilterSerializer(serializers.Serializer):
    """Query parameters of the queue."""

    team = query_text("Team slug, or several separated by commas: only their waiting jobs, each with its place in "
                      "the whole queue and in its team's; a team you cannot see is a 400 naming those you can.")
    after = serializers.IntegerField(
        min_value=1, max_value=2**63 - 1, required=False,
        help_text="A job's id (each `next` link gives the last job of its page): the page starts right after that "
                  "job, wherever it stands now, so jobs leaving the queue ahead of it never make another skip a page.")
    at = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False,
        help_text="With `after`: how many jobs came before it (the `next` link gives it); where the page starts "
                  "when that job has left the queue since.")


class ReplicaLogSerializer(serializers.Serializer):
    """One replica's recent log lines and how it stopped (`scheduling.cluster.base.ReplicaLog`)."""

    replica = serializers.CharField(help_text="Replica type and index, e.g. worker-0.")
    pod = serializers.CharField()
    phase = serializers.CharField(help_text="Pending, Running, Succeeded or Failed.")
    exit_code = serializers.IntegerField(allow_null=True, help_text="Null while it runs.")
    reason = serializers.CharField(help_text="OOMKilled, Error, ImagePullBackOff, Evicted, Completed... or empty.")
    explanation = serializers.CharField(help_text="What the reason means, in words; empty when it has none.")
    message = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)
    lines = serializers.ListField(child=serializers.CharField(), help_text="The last lines, oldest first.")
    times = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="When each line was written, as the cluster stamps it (RFC 3339 in UTC with nine digits of "
        "fraction), one per line; several lines may share a time.",
    )  # fmt: skip
    skipped = serializers.IntegerField(
        required=False, min_value=0,
        help_text="Read with `cursor` only: lines written after the cursor's position that this answer leaves out, "
        "before its first line (more came than `tail` holds); 0 when none.",
    )  # fmt: skip
    skipped_exact = serializers.BooleanField(
        required=False,
        help_text="False when `skipped` is a lower bound, or lines may be missing although it is 0: the cluster "
        "no longer has the log the position was in (a container restarted twice, a pod replaced, a log rotated), "
        "or more was written than one read counts.",
    )  # fmt: skip


class JobLogsSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    state = serializers.CharField()
    failure = ReplicaLogSerializer(allow_null=True, help_text="The replica that failed first; null when none failed.")
    replicas = ReplicaLogSerializer(many=True)
    cursor = serializers.CharField(
        required=False,
        help_text="Where this answer ends in each replica's log: pass it back as `?cursor=` for the lines "
        "written since, each line once. Opaque; absent from portals that cannot read on from a position.",
    )  # fmt: skip
