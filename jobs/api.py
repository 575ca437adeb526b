"""REST API for jobs: submit (idempotent), list, read, cancel, events, logs (`api_logs`); and the queue.

Thin views over `jobs.services` and `jobs.selectors`. A team token sees and
acts for its own team only; a person (session or user token) for the teams
they belong to (all of them for staff). Another team's job answers 404.
"""

from __future__ import annotations

import re

from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet, prefetch_related_objects
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.pagination import PageNumberPagination
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from jobs import job_tokens, schema_examples as examples
from jobs.api_logs import JobLogsActions
from jobs.models import Job
from jobs.parsers import YAML_PARSERS, JsonParser, spec_data_from_document
from jobs.selectors import NEWEST_FIRST, NewestOfTeams, ids_of, in_queue_order, jobs_for, jobs_of_team
from jobs.serializers import (
    JobEventSerializer,
    JobFilterSerializer,
    JobSerializer,
    JobSpecSerializer,
    QueueFilterSerializer,
    SubmittedJobSerializer,
)
from jobs.services import (
    IdempotencyConflict, KatibTrial, NeverFits, NotRunning, QueueFull, job_cancel, job_checkpoint, job_submit,
)
from jobs.spec import MAX_GPU_TYPES, SpecError, parse_spec
from tenants.auth import ApiDefaults, request_token, team_scope
from tenants.models import DNS_LABEL, Team
from tenants.permissions import can_cancel, can_submit
from tenants.schema_examples import ERROR
from tenants.selectors import teams_for, tier_for

IDEMPOTENCY_KEY_MAX = 200  # Job.idempotency_key
# What the schema promises is accepted: printable ASCII (an HTTP field value's visible characters and
# spaces), at most IDEMPOTENCY_KEY_MAX of them. The check below accepts any printable text of that length.
IDEMPOTENCY_KEY_PATTERN = rf"^[\x20-\x7E]{{0,{IDEMPOTENCY_KEY_MAX}}}$"
# ?gpu_type=: at most MAX_GPU_TYPES names of at most 63 characters, comma-separated (the spec checks the rest).
_TYPE_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
GPU_TYPES_PARAMETER = rf"^{_TYPE_NAME}(,{_TYPE_NAME}){{0,{MAX_GPU_TYPES - 1}}}$"


class JobPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request) -> int:
        """`?page_size=`, at most max_page_size; the default when it is absent or empty. Anything but a whole
        number of at least 1 is a 400 naming it: DRF answered a typo (`abc`, `0`, `-5`) with the default."""
        given = request.query_params.get(self.page_size_query_param, "")
        if not given:
            return self.page_size
        digits = given.lstrip("0")
        if not (given.isascii() and given.isdigit() and digits):
            raise exceptions.ValidationError({self.page_size_query_param: [
                f"A whole number from 1 to {self.max_page_size} (a larger one reads as {self.max_page_size}), "
                f"got {given[:40]!r}."]})  # fmt: skip
        # Compared by length first: a number of thousands of digits is too long for int().
        if len(digits) > len(str(self.max_page_size)):
            return self.max_page_size
        return min(int(digits), self.max_page_size)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["minimum"] = 1
                parameter["description"] = (f"Results per page, from 1 to {self.max_page_size} (a larger number "
                                            f"reads as {self.max_page_size}); {self.page_size} by default.")
        return parameters


def visible_jobs(request) -> QuerySet[Job]:
    team = team_scope(request)
    return jobs_of_team(team) if team is not None else jobs_for(request.user)


TEAMS_NAMED = 20  # the most teams a refused ?team= lists of those the caller can see (staff see every team)


def teams_asked(request, asked: str | None) -> list[str]:
    """The slugs `?team=` names (one, or several separated by commas, as `?state=` takes states), each of a team
    the caller can see: a team token its own, a person their teams (staff all); [] when it names none.

    Raises ValidationError ({"team": [sentence]}, a 400) naming each slug that is no team the caller can see and
    the teams it can, so a misspelt team in a CI script is told, not answered with an empty list. An unknown team
    and another team's read alike, as a job of another team is a 404 like one that does not exist.
    """
    slugs = list(dict.fromkeys(slug.strip() for slug in (asked or "").split(",") if slug.strip()))
    if not slugs:
        return []
    scoped = team_scope(request)
    visible = [scoped.slug] if scoped is not None else list(teams_for(request.user).values_list("slug", flat=True))
    unknown = [slug for slug in slugs if slug not in visible]
    if unknown:
        names = ", ".join(sorted(visible)[:TEAMS_NAMED]) or "none"
        more = f" and {len(visible) - TEAMS_NAMED} more" if len(visible) > TEAMS_NAMED else ""
        raise exceptions.ValidationError({"team": [
            f"No team {', '.join(repr(slug[:80]) for slug in unknown)} among the teams you can see: {names}{more}."]})
    return slugs


def caller_name(request) -> str:
    """How a submission or cancel is recorded: 'API', or 'API token NAME'."""
    token = request_token(request)
    return f"API token {token.name}" if token else "API"


def submittable_team(request, slug: str) -> Team:
    """The team the caller may submit for; PermissionDenied (naming the teams it may use) otherwise.

    An unknown team and a team the caller is not in answer alike, so the
    answer never reveals which teams exist.
    """
    scoped = team_scope(request)
    if scoped is not None:
        if scoped.slug != slug:
            raise exceptions.PermissionDenied(
                f"This token acts for team {scoped.slug} only; it cannot submit for team {slug!r}."
            )
        return scoped
    team = Team.objects.filter(slug=slug).first()
    if team is None or not can_submit(request.user, team):
        mine = ", ".join(teams_for(request.user).values_list("slug", flat=True)) or "none"
        raise exceptions.PermissionDenied(
            f"You cannot submit for team {slug!r}: you are not a member. Your teams: {mine}."
        )
    return team


def check_token_tier(request, team: Team, tier_name: str) -> None:
    """PermissionDenied when a team token with a highest tier asks for a higher one."""
    token = request_token(request)
    if token is None or token.max_tier is None:
        return
    prefetch_related_objects([team], "tiers")  # read once: job_submit looks the tier up again
    tier, _ = tier_for(team, tier_name)
    if tier is not None and tier.value > token.max_tier.value:
        raise exceptions.PermissionDenied(
            f"This token may submit up to tier {token.max_tier.name}; the job asks for tier {tier.name}."
        )


def with_asked_gpu_types(request, data):
    """The spec data with the GPU types `?gpu_type=` names (comma-separated or repeated) put in, as
    the CLI sends them beside a file; the data unchanged without the parameter. A body that names
    other types is refused (ValidationError), never silently overridden."""
    asked = [name for value in request.query_params.getlist("gpu_type") for name in value.split(",") if name]
    if not asked or not isinstance(data, dict):
        return data
    written = data.get("gpu_type")
    written = [written] if isinstance(written, str) and written else written
    if written not in (None, [], asked):
        raise exceptions.ValidationError({"gpu_type": [
            f"?gpu_type= asks for {', '.join(asked)[:200]}, but the body names {written!r:.200}; give them once."]})
    return {**data, "gpu_type": asked}


ORDERING_FIELDS = ["submitted_at", "queued_at", "started_at", "finished_at", "position", "gpu_total", "id"]
_ORDER_BY = f"-?({'|'.join(ORDERING_FIELDS)})"
ORDERING = OpenApiParameter(
    "ordering", str, OpenApiParameter.QUERY, required=False, pattern=f"^{_ORDER_BY}(,{_ORDER_BY})*$",
    description="Fields to order by, comma-separated, each with `-` for descending: "
                f"{', '.join(ORDERING_FIELDS)}. Newest submission first by default.",
)  # fmt: skip


class TieBrokenOrdering(OrderingFilter):
    """DRF's ordering, ended by the job's id in the last field's direction unless it names the id: most fields
    tie (every 1-GPU trial has the same gpu_total, every waiting job no started_at), and PostgreSQL returns
    tied rows in an order of its own for each page, so pages repeated some jobs and never showed others."""

    def remove_invalid_fields(self, queryset, fields, view, request):
        """The fields asked for; a 400 naming those it cannot order by (DRF left them out without a word)."""
        valid = super().remove_invalid_fields(queryset, fields, view, request)
        unknown = [field for field in fields if field not in valid]
        if unknown:
            raise exceptions.ValidationError({self.ordering_param: [
                f"Cannot order by {', '.join(repr(field[:80]) for field in unknown[:5])}: order by "
                f"{', '.join(ORDERING_FIELDS)}, comma-separated, each with - for descending."]})  # fmt: skip
        return valid

    def get_ordering(self, request, queryset, view):
        ordering = super().get_ordering(request, queryset, view)
        if not ordering or any(field.lstrip("-") == "id" for field in ordering):
            return ordering
        return [*ordering, "-id" if ordering[-1].startswith("-") else "id"]


@extend_schema_view(
    list=extend_schema(summary="List jobs", parameters=[JobFilterSerializer, ORDERING], tags=["jobs"]),
    retrieve=extend_schema(summary="Read a job", tags=["jobs"], examples=[examples.JOB]),
)
class JobViewSet(JobLogsActions, ApiDefaults, GenericViewSet):
    serializer_class = JobSerializer
    pagination_class = JobPagination
    parser_classes = [JsonParser, *YAML_PARSERS]
    filter_backends = [TieBrokenOrdering]
    ordering_fields = ORDERING_FIELDS
    ordering = list(NEWEST_FIRST)
    lookup_value_regex = r"[^/]+"  # anything up to the slash: a bad id gets DRF's JSON 404, not the page

    def get_queryset(self):
        return visible_jobs(self.request)

    def get_object(self) -> Job:
        pk = self.kwargs["pk"]
        job = self.get_queryset().filter(pk=pk).first() if pk.isascii() and pk.isdigit() and len(pk) < 19 else None
        if job is None:
            raise exceptions.NotFound(f"No job {self.kwargs['pk']} among the jobs you can see.")
        return job

    def list(self, request):
        filters = JobFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        jobs = self.filter_queryset(self.get_queryset())
        values = filters.validated_data
        asked = teams_asked(request, values.get("team"))
        team_ids = None
        if team_scope(request) is None:  # a person: their teams (or those asked for) named by id, see ids_of
            teams = teams_for(request.user)
            team_ids = ids_of(teams.filter(slug__in=asked) if asked else teams)
        if asked:
            jobs = jobs.filter(team__slug__in=asked)
        if values.get("state"):
            jobs = jobs.filter(state__in=sorted(values["state"]))
        if values.get("tier"):
            jobs = jobs.filter(tier__name=values["tier"])
        if values.get("owner"):
            jobs = jobs.filter(owner__username=values["owner"])
        if values.get("gpu_type"):
            jobs = jobs.filter(assigned_gpu_type=values["gpu_type"])
        if team_ids is not None and len(team_ids) > 1 and jobs.query.order_by == NEWEST_FIRST:
            jobs = NewestOfTeams(jobs, team_ids)
        elif team_ids is not None:
            jobs = jobs.filter(team_id__in=team_ids)
        page = self.paginate_queryset(jobs)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        summary="Submit a job",
        description=(
            "Body: Gangway's job spec, or a manifest of one of its job kinds (see the kind field), as JSON or YAML "
            "(`Content-Type: application/yaml`). The team comes from the spec, `?team=`, or the team token. "
            "With an `Idempotency-Key`, a retry with the same body answers 200 with the original job; the same "
            "key with another body answers 409. A job that can never fit answers 400 with the reason. When the "
            "team already has `MAX_QUEUED_PER_TEAM` jobs queued, a new job answers 409 with `code` `queue_full` "
            "and nothing is created (a replay of a key already used still answers 200): submit again once some "
            "have started or been cancelled."
        ),
        tags=["jobs"],
        parameters=[
            OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
                             pattern=IDEMPOTENCY_KEY_PATTERN,
                             description=f"At most {IDEMPOTENCY_KEY_MAX} printable characters; unique per team."),
            OpenApiParameter("team", str, OpenApiParameter.QUERY, required=False, pattern=DNS_LABEL,
                             description="Team slug, when the body does not name it."),
            OpenApiParameter("gpu_type", str, OpenApiParameter.QUERY, required=False, pattern=GPU_TYPES_PARAMETER,
                             description="GPU types it accepts, comma-separated in order of preference (a100,l4), "
                             "when the body does not name them; a manifest has no field of its own for them."),
        ],  # fmt: skip
        request=JobSpecSerializer,  # under each media type the view's parsers take (parser_classes)
        responses={
            201: SubmittedJobSerializer,
            200: OpenApiResponse(SubmittedJobSerializer, description="Replay of an earlier submission with this key."),
            400: OpenApiResponse(ERROR, description="Invalid spec (field dict) or a job that can never fit."),
            401: OpenApiResponse(ERROR, description="No or bad credentials."),
            403: OpenApiResponse(ERROR, description="Not allowed to submit for this team or tier."),
            409: OpenApiResponse(ERROR, description="Idempotency key reused with a different body, or the team "
                                 "already has MAX_QUEUED_PER_TEAM jobs queued (`code` `queue_full`)."),
        },
        examples=[examples.SUBMIT_SPEC, examples.SUBMIT_TYPED, examples.SUBMIT_MANIFEST, examples.SUBMITTED,
                  examples.SPEC_ERRORS, examples.NEVER_FITS, examples.CONFLICT, examples.QUEUE_FULL],  # fmt: skip
    )
    def create(self, request):
        data, unsupported = spec_data_from_document(request.data)
        scoped = team_scope(request)
        slug = request.query_params.get("team") or (data.get("team") if isinstance(data, dict) else None)
        slug = slug or (scoped.slug if scoped else None)
        if not isinstance(slug, str) or not slug:
            raise exceptions.ValidationError(
                {"team": ["Required: name the team in the spec (\"team\": \"maps\") or with ?team=maps."]}
            )
        if len(slug) > 63 or not re.fullmatch(DNS_LABEL, slug):
            raise exceptions.ValidationError({"team": [f"Not a team name (a Kubernetes DNS label): {slug[:80]!r}."]})
        team = submittable_team(request, slug)
        data = with_asked_gpu_types(request, data)
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > IDEMPOTENCY_KEY_MAX:
            raise exceptions.ValidationError({"Idempotency-Key": [f"At most {IDEMPOTENCY_KEY_MAX} characters, got {len(key)}."]})
        if not key.isprintable():
            raise exceptions.ValidationError({"Idempotency-Key": ["Use printable characters only."]})
        try:
            spec = parse_spec(data, team=team.slug)
            check_token_tier(request, team, spec.tier)
            person = None if scoped else request.user
            job, created = job_submit(team=team, spec=spec, owner=person, via=caller_name(request), idempotency_key=key)
        except SpecError as error:
            raise exceptions.ValidationError(error.errors) from None
        except NeverFits as error:
            return Response({"detail": f"Can never run: {error.reason}", "code": error.code}, status.HTTP_400_BAD_REQUEST)
        except IdempotencyConflict as error:
            return Response({"detail": str(error), "job": error.job.pk}, status.HTTP_409_CONFLICT)
        except QueueFull as error:  # the spec is valid; the team's queue is not (yet) able to take it: not a 400
            return Response({"detail": str(error), "code": error.code}, status.HTTP_409_CONFLICT)
        job.unsupported = unsupported
        body = SubmittedJobSerializer(job, context=self.get_serializer_context()).data
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(body, status=answer, headers={"Location": body["url"]})

    @extend_schema(
        summary="Cancel a job", request=None, tags=["jobs"],
        description="A queued job is cancelled at once; an admitted or running one stops at the next reconcile "
        "(state `cancelling`). Cancelling a cancelled job changes nothing; a finished one answers 409, as does "
        "an open trial of a Katib sweep, which Katib stops (delete its trial there).",
        responses={200: JobSerializer, 403: OpenApiResponse(ERROR), 404: OpenApiResponse(ERROR),
                   409: OpenApiResponse(ERROR)},
    )  # fmt: skip
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        person = None if team_scope(request) else request.user
        if person is not None and not can_cancel(person, job):
            raise exceptions.PermissionDenied(
                f"Only the job's owner, a lead of team {job.team.slug} or an admin can cancel job {job.pk}."
            )
        try:
            job = job_cancel(job=job, actor=person, via=caller_name(request))
        except KatibTrial as error:
            return Response({"detail": str(error)}, status.HTTP_409_CONFLICT)
        # Judged on the job as job_cancel found it under its row lock: one that ended since this request read
        # it (reconcile saw it succeed) is still a 409, never a 200 that reads as if the cancel took.
        if job.state in (Job.State.SUCCEEDED, Job.State.FAILED, Job.State.REJECTED):
            return Response({"detail": f"Job {job.name} (#{job.pk}) already ended ({job.state}); nothing to cancel."},
                            status.HTTP_409_CONFLICT)  # fmt: skip
        job = self.get_queryset().get(pk=job.pk)
        return Response(self.get_serializer(job).data)

    @extend_schema(summary="A job's events, oldest first", tags=["jobs"], responses=JobEventSerializer(many=True),
                   examples=[examples.EVENTS])  # fmt: skip
    @action(detail=True, methods=["get"], filter_backends=[])
    def events(self, request, pk=None):
        job = self.get_object()
        page = self.paginate_queryset(job.events.select_related("actor").order_by("at", "id"))
        return self.get_paginated_response(JobEventSerializer(page, many=True).data)


class QueuePagination(JobPagination):
    """Pages of the queue, which moves at every cycle. Read by page number, a job leaving the queue ahead (one
    admitted, one cancelled) moved the jobs behind it up a page between two reads, and they were never shown.
    So each `next` link names the last job of its page (`after`, with `at`, how many came before it), and
    that page starts right after that job wherever it stands then; where it last stood, if it has left the
    queue or moved back. `page` still reads the queue by number."""

    def paginate_queryset(self, queryset, request, view=None):
        cursor = QueueFilterSerializer(data=request.query_params)
        cursor.is_valid(raise_exception=True)
        after = cursor.validated_data.get("after")
        if after is None:
            shown = super().paginate_queryset(queryset, request, view)
            if shown is not None:
                self.count, self.end = self.page.paginator.count, self.page.end_index()
                self.last = shown[-1].pk if shown else None
            return shown
        self.request, self.page = request, None
        ids = list(queryset.values_list("id", flat=True))
        at = min(cursor.validated_data.get("at", 0), len(ids))
        # Right after the job, when jobs ahead of it left or it stands where it stood; where it stood, when it has
        # left the queue or moved back (a job held out of the plan goes to its end): never past the jobs between.
        index = ids.index(after) if after in ids else None
        start = index + 1 if index is not None and index <= at else at
        size = self.get_page_size(request) or len(ids)
        shown = ids[start:start + size]
        by_id = queryset.in_bulk(shown)
        self.count, self.end = len(ids), start + len(shown)
        self.last = shown[-1] if shown else None
        return [by_id[pk] for pk in shown if pk in by_id]

    def get_paginated_response(self, data):
        previous = self.get_previous_link() if self.page is not None else None
        return Response({"count": self.count, "next": self.get_next_link(), "previous": previous, "results": data})

    def get_next_link(self):
        if self.last is None or self.end >= self.count:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), self.page_query_param)
        return replace_query_param(replace_query_param(url, "after", self.last), "at", self.end - 1)


@extend_schema(summary="The queue: waiting jobs you can see, in order", parameters=[QueueFilterSerializer],
               tags=["jobs"])  # fmt: skip
class QueueView(ApiDefaults, generics.ListAPIView):
    serializer_class = JobSerializer
    pagination_class = QueuePagination

    def get_queryset(self):
        filters = QueueFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        jobs = visible_jobs(self.request)
        if asked := teams_asked(self.request, filters.validated_data.get("team")):
            jobs = jobs.filter(team__slug__in=asked)
        return in_queue_order(jobs)


class JobTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer gjt_...`: a job token (see `jobs.job_tokens`), checked by the view
    against the job in its URL. Other tokens are left to no one: this view knows only job tokens."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != b"bearer" or not header[1].startswith(job_tokens.PREFIX.encode()):
            raise exceptions.AuthenticationFailed("Send the job's own token: 'Authorization: Bearer $GANGWAY_JOB_TOKEN'.")
        return (AnonymousUser(), header[1].decode("ascii", "replace"))

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="job"'


class JobTokenScheme(OpenApiAuthenticationExtension):
    """Documents JobTokenAuthentication in the OpenAPI schema as HTTP bearer."""

    target_class = "jobs.api.JobTokenAuthentication"
    name = "jobToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gjt_ token",
                "description": "A running job's own token, GANGWAY_JOB_TOKEN in its pods."}  # fmt: skip


class CheckpointSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    checkpointed_at = serializers.DateTimeField()


class JobCheckpointView(APIView):
    """A job whose pods may be running (admitted, running or preempting) says "I just saved a
    checkpoint", with the token in its pods."""

    authentication_classes = [JobTokenAuthentication]
    permission_classes = []
    throttle_classes = []

    @extend_schema(
        summary="Report that a job just saved a checkpoint", tags=["jobs"], request=None,
        description="Authorised only by the job's own token (GANGWAY_JOB_TOKEN in its pods), for this job alone. "
        "An admitted, running or preempting job reports (preempting: its grace period, when scripts save; "
        "its next run resumes from that checkpoint). Preemption takes jobs with the least unsaved work first "
        "(R8). `gangway checkpoint` sends it.",
        responses={200: CheckpointSerializer, 401: OpenApiResponse(ERROR), 403: OpenApiResponse(ERROR),
                   404: OpenApiResponse(ERROR),
                   409: OpenApiResponse(ERROR, description="The job is not admitted, running or preempting.")},
    )  # fmt: skip
    def post(self, request, job_id: int):
        try:
            job_tokens.verify(request.auth, job_id)
        except job_tokens.BadJobToken as error:
            raise exceptions.PermissionDenied(str(error)) from None
        try:
            job = job_checkpoint(job_id=job_id, at=timezone.now())
        except Job.DoesNotExist:
            raise exceptions.NotFound(f"No job {job_id}.") from None
        except NotRunning as error:
            return Response({"detail": str(error)}, status.HTTP_409_CONFLICT)
        return Response(CheckpointSerializer({"job": job.pk, "checkpointed_at": job.checkpointed_at}).data)
