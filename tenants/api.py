"""REST API for teams: quotas and live usage, staff quota changes with a what-if, and API tokens.

Teams outside the caller's view answer 404; a visible team the caller may not
change answers 403. Team tokens read their own team and manage nothing.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.viewsets import GenericViewSet

from scheduling.preview import quota_what_if
from scheduling.selectors import team_usage
from tenants.auth import ApiDefaults, TeamPrincipal, query_flag, team_scope
from tenants.models import DNS_LABEL, Membership, Team
from tenants.permissions import can_edit_quota, can_manage_tokens
from tenants.quota_conflicts import QuotaAsRead, QuotaChanged, changes_since
from tenants.schema_examples import ERROR
from tenants.selectors import teams_for
from tenants.serializers import (
    QuotaUpdateSerializer,
    QuotaWhatIfSerializer,
    TeamSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
    basis_figures,
    what_if_data,
)
from tenants.services import quota_update, quota_values
from tenants.tokens import TokenLimitReached, token_create, token_revoke, tokens_for_team, tokens_for_user

TEAM_EXAMPLE = OpenApiExample(
    "A team borrowing 4 GPUs",
    response_only=True,
    value={
        "slug": "maps", "name": "Maps", "weight": 1.0, "role": "lead", "tiers": ["production", "standard"],
        "default_tier": "standard",
        "quotas": [{"resource": "gpu", "nominal": 8, "borrowing_limit": 8, "lending_limit": None,
                    "max_per_replica": 8, "default_per_replica": None}],
        "usage": {"gpu": {"nominal": 8, "used": 12, "within": 8, "borrowed": 4, "lent": 0, "idle": 0,
                          "waiting": 2, "borrowing_limit": 8}},
    },
)  # fmt: skip
TYPED_TEAM_EXAMPLE = OpenApiExample(
    "A team with a quota per GPU type",
    response_only=True,
    value={
        "slug": "vision", "name": "Vision", "weight": 1.0, "role": "member", "tiers": ["standard"],
        "default_tier": "standard",
        "quotas": [{"resource": "gpu:a100", "nominal": 4, "borrowing_limit": 4, "lending_limit": None,
                    "max_per_replica": 8, "default_per_replica": None},
                   {"resource": "gpu:l4", "nominal": 16, "borrowing_limit": None, "lending_limit": 8,
                    "max_per_replica": 8, "default_per_replica": None}],
        "usage": {"gpu": {"nominal": 20, "used": 6, "within": 6, "borrowed": 0, "lent": 2, "idle": 12,
                          "waiting": 0, "borrowing_limit": None}},
    },
)  # fmt: skip
TOKEN_EXAMPLE = OpenApiExample(
    "A new team token",
    response_only=True,
    status_codes=["201"],
    value={"id": 3, "name": "ci-main", "team": "maps", "user": None, "max_tier": "standard", "prefix": "gw_Xy12ab3",
           "created_by": "lead", "created_at": "2025-05-01T12:00:00Z", "last_used_at": None,
           "expires_at": "2026-05-01T12:00:00Z", "revoked_at": None, "token": "gw_Xy12ab3...(43 characters)"},
)  # fmt: skip

QUOTA_ANSWER = PolymorphicProxySerializer(
    component_name="QuotaAnswer", serializers=[TeamSerializer, QuotaWhatIfSerializer], resource_type_field_name=None
)


def _is_id(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) < 19


def visible_teams(request):
    scoped = team_scope(request)
    teams = Team.objects.filter(pk=scoped.pk) if scoped else teams_for(request.user)
    return teams.select_related("default_tier").prefetch_related("tiers", "quotas")


def require_person(request, what: str):
    """The signed-in person; PermissionDenied for a team token, which acts for no person."""
    if isinstance(request.user, TeamPrincipal):
        raise exceptions.PermissionDenied(f"A team token cannot {what}; sign in, or use a lead's user token.")
    return request.user


@extend_schema_view(
    list=extend_schema(summary="Teams you can see, with quotas and live GPU usage", tags=["teams"],
                       examples=[TEAM_EXAMPLE, TYPED_TEAM_EXAMPLE]),
    retrieve=extend_schema(summary="A team's quotas and live GPU usage (used, borrowed, lent)", tags=["teams"],
                           description="On a cluster with GPU types, GPU quota is per type: one row per "
                           "`gpu:<type>` (e.g. `gpu:a100`) in place of `gpu`.",
                           examples=[TEAM_EXAMPLE, TYPED_TEAM_EXAMPLE]),
)  # fmt: skip
class TeamViewSet(ApiDefaults, mixins.ListModelMixin, mixins.RetrieveModelMixin, GenericViewSet):
    serializer_class = TeamSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[^/]+"  # a malformed slug gets DRF's JSON 404, not the page

    def get_queryset(self):
        return visible_teams(self.request)

    def get_object(self) -> Team:
        slug = self.kwargs["slug"]
        # A slug that is not a DNS label names no team; checked first, since PostgreSQL refuses NUL in a query.
        team = self.get_queryset().filter(slug=slug).first() if len(slug) <= 63 and re.fullmatch(DNS_LABEL, slug) else None
        if team is None:
            raise exceptions.NotFound(f"No team {slug[:80]!r} among the teams you can see.")
        return team

    def get_serializer_context(self):
        context = super().get_serializer_context()
        user = self.request.user
        roles = {}
        if not isinstance(user, TeamPrincipal) and user.is_authenticated:
            roles = dict(Membership.objects.filter(user=user).values_list("team_id", "role"))
        context.update(roles=roles, usage={u.slug: u for u in team_usage()})
        return context

    @extend_schema(
        summary="Change a team's quotas (staff)", tags=["teams"],
        description="PUT replaces every quota (a resource left out loses its quota); PATCH changes only the "
        "resources given. The resources are `gpu`, `cpu` and `memory` on a cluster without GPU types; with types, "
        "GPU quota is per type, `gpu:<type>` (e.g. `gpu:a100`), and `gpu` is refused; a type the cluster lacks is "
        "a 400 naming the resources it has. With `?dry_run=true` nothing is saved: the answer is the what-if, which jobs would be "
        "preempted, start, or could never fit. `dry_run` takes true/false, 1/0, yes/no or on/off; anything else "
        "is a 400, so a misspelt preview never saves. With `based_on`, the quotas (and weight) the change starts "
        "from as you read them, a change made since by another admin is not undone: the answer is a 409 naming it, "
        "and nothing is saved (a dry run answers the same 409).",
        parameters=[OpenApiParameter("dry_run", bool, OpenApiParameter.QUERY, required=False,
                                     description="true to preview the change instead of saving it.")],
        request=QuotaUpdateSerializer,
        responses={200: OpenApiResponse(QUOTA_ANSWER, description="The team as saved; with dry_run, the what-if."),
                   400: OpenApiResponse(ERROR, description="A bad dry_run, resource or amount (field dict)."),
                   403: OpenApiResponse(ERROR), 404: OpenApiResponse(ERROR),
                   409: OpenApiResponse(ERROR, description="The quota changed since `based_on` was read; nothing saved.")},
        examples=[
            OpenApiExample("Raise nominal, cap borrowing", request_only=True,
                           value={"quotas": {"gpu": {"nominal": 12, "borrowing_limit": 4, "lending_limit": None}}}),
            OpenApiExample("Per GPU type: 4 H100 and 16 L4", request_only=True, value={"quotas": {
                "gpu:h100": {"nominal": 4, "borrowing_limit": 0, "lending_limit": None},
                "gpu:l4": {"nominal": 16, "borrowing_limit": 8, "lending_limit": 8}}}),
            OpenApiExample("Only if nobody changed it since", request_only=True, value={
                "quotas": {"gpu": {"nominal": 8, "borrowing_limit": 0, "lending_limit": None}},
                "based_on": {"weight": 1.0, "quotas": {"gpu": {"nominal": 8, "borrowing_limit": 8,
                                                               "lending_limit": None}}}}),
            OpenApiExample("Changed since it was read", response_only=True, status_codes=["409"], value={
                "detail": "Since you read it, gpu nominal was changed from 8 GPUs to 4 GPUs by alice at 10:02 UTC; "
                          "your change (gpu borrowing limit 8 -> 0) was not saved — read the team's quota again "
                          "and make your change on it."}),
            OpenApiExample("A type the cluster lacks", response_only=True, status_codes=["400"], value={
                "quotas": ["Unknown resource gpu:t4; the resources are gpu:l4, gpu:a100, cpu, memory."]}),
            OpenApiExample("What-if", response_only=True, value={
                "dry_run": True, "quiet": False, "starting": [{"id": 51, "name": "bert", "team": "maps", "reason": ""}],
                "preempted": [{"id": 40, "name": "gan", "team": "vision", "reason": "to make room for bert (#51)"}],
                "rejected": []}),
        ],
    )  # fmt: skip
    @action(detail=True, methods=["put", "patch"], url_path="quota")
    def quota(self, request, slug=None):
        team = self.get_object()
        if not can_edit_quota(request.user):
            # The quota page refuses the same people its what-if: nowhere does a non-admin preview a change.
            raise exceptions.PermissionDenied("Only admins (staff) change quotas or preview a change of them; ask one.")
        dry_run = query_flag(request, "dry_run")
        update = QuotaUpdateSerializer(data=request.data, partial=request.method == "PATCH")
        update.is_valid(raise_exception=True)
        quotas = dict(update.validated_data.get("quotas", {}))
        if request.method == "PUT":
            quotas = {**{q.resource: None for q in team.quotas.all()}, **quotas}
        basis = update.validated_data.get("based_on")
        read = QuotaAsRead(figures=basis_figures(basis)) if basis else None
        try:
            if dry_run:
                if read and (changes := changes_since(team, read, quota_values(team))):
                    raise QuotaChanged(changes)
                result = quota_what_if(team=team, quotas=quotas)
                return Response(QuotaWhatIfSerializer(what_if_data(result)).data)
            quota_update(team=team, quotas=quotas, weight=update.validated_data.get("weight"), actor=request.user,
                         based_on=read)  # fmt: skip
        except QuotaChanged as changed:
            return Response({"detail": changed.refusal("you read it", "read the team's quota again and make your "
                                                       "change on it")}, status.HTTP_409_CONFLICT)  # fmt: skip
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(summary="A team's API tokens (leads and staff)", tags=["tokens"], methods=["GET"],
                   responses=TokenSerializer(many=True))  # fmt: skip
    @extend_schema(
        summary="Create a team token (leads and staff)", tags=["tokens"], methods=["POST"],
        description="The token is in the answer this once; only its SHA-256 is stored.",
        request=TokenCreateSerializer, responses={201: TokenCreatedSerializer, 403: OpenApiResponse(ERROR)},
        examples=[OpenApiExample("CI token", request_only=True,
                                 value={"name": "ci-main", "max_tier": "standard", "expires_in_days": 365}),
                  TOKEN_EXAMPLE],
    )  # fmt: skip
    @action(detail=True, methods=["get", "post"], url_path="tokens", pagination_class=None)
    def tokens(self, request, slug=None):
        team = self.get_object()
        person = require_person(request, "manage tokens")
        if not can_manage_tokens(person, team):
            raise exceptions.PermissionDenied(f"Only leads of team {team.slug} and admins manage its tokens.")
        if request.method == "GET":
            return Response(TokenSerializer(tokens_for_team(team), many=True).data)
        form = TokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        max_tier = form.validated_data.get("max_tier")
        if max_tier is not None and not team.tiers.filter(pk=max_tier.pk).exists():
            allowed = ", ".join(team.tiers.values_list("name", flat=True)) or "none"
            raise exceptions.ValidationError({"max_tier": [f"Team {team.slug} may use tiers {allowed}."]})
        token, value = token_create(name=form.validated_data["name"], team=team, max_tier=max_tier, actor=person,
                                    days=form.validated_data["expires_in_days"])  # fmt: skip
        token.token = value
        return Response(TokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Revoke a team token (leads and staff)", tags=["tokens"], request=None,
                   responses={200: TokenSerializer, 403: OpenApiResponse(ERROR), 404: OpenApiResponse(ERROR)})  # fmt: skip
    @action(detail=True, methods=["delete"], url_path=r"tokens/(?P<token_id>[^/]+)")
    def revoke_token(self, request, slug=None, token_id=None):
        team = self.get_object()
        person = require_person(request, "manage tokens")
        if not can_manage_tokens(person, team):
            raise exceptions.PermissionDenied(f"Only leads of team {team.slug} and admins manage its tokens.")
        token = tokens_for_team(team).filter(pk=token_id).first() if _is_id(token_id) else None
        if token is None:
            raise exceptions.NotFound(f"Team {team.slug} has no token {token_id}.")
        return Response(TokenSerializer(token_revoke(token=token, actor=person)).data)


@extend_schema_view(
    list=extend_schema(summary="Your user tokens", tags=["tokens"]),
    create=extend_schema(summary="Create a user token (acts as you)", tags=["tokens"], request=TokenCreateSerializer,
                         responses={201: TokenCreatedSerializer}),
    destroy=extend_schema(summary="Revoke one of your user tokens", tags=["tokens"],
                          responses={200: TokenSerializer, 404: OpenApiResponse(ERROR)}),
)  # fmt: skip
class UserTokenViewSet(ApiDefaults, GenericViewSet):
    serializer_class = TokenSerializer
    pagination_class = None
    lookup_value_regex = r"[^/]+"

    def get_queryset(self):
        return tokens_for_user(require_person(self.request, "manage user tokens"))

    def list(self, request):
        return Response(TokenSerializer(self.get_queryset(), many=True).data)

    def create(self, request):
        person = require_person(request, "create user tokens")
        form = TokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            token, value = token_create(name=form.validated_data["name"], user=person, actor=person,
                                        days=form.validated_data["expires_in_days"])  # fmt: skip
        except TokenLimitReached as error:
            raise exceptions.ValidationError({"detail": str(error)}) from None
        token.token = value
        return Response(TokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, pk=None):
        token = self.get_queryset().filter(pk=pk).first() if _is_id(pk) else None
        if token is None:
            raise exceptions.NotFound(f"You have no user token {pk}.")
        return Response(TokenSerializer(token_revoke(token=token, actor=request.user)).data)
