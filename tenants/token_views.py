"""Token pages: a team's API tokens (leads and staff) and the signed-in user's own tokens.

A new token's value is rendered into the answer to the create post and
nowhere else: it is never stored, put in the session or shown on a later GET.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from tenants.forms import TokenForm
from tenants.models import ApiToken, Team
from tenants.selectors import teams_for
from tenants.permissions import can_manage_tokens
from tenants.tokens import TokenLimitReached, token_create, token_revoke, tokens_for_team, tokens_for_user


def _get_team_for_tokens(request, slug: str) -> Team:
    """The team if the user leads it (staff: any team); 404 outside their teams, 403 for members who do not lead."""
    team = teams_for(request.user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    if not can_manage_tokens(request.user, team):
        raise PermissionDenied(f"Only leads of team {team.slug} and admins manage its API tokens.")
    return team


def _get_token(tokens, token_id: int) -> ApiToken:
    token = tokens.filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    return token


def _render(request, *, team: Team | None, form: TokenForm, created: tuple[ApiToken, str] | None = None, status=200):
    """The tokens page, or on an htmx post its `create` fragment with the list swapped out of band."""
    tokens = tokens_for_team(team) if team else tokens_for_user(request.user).select_related("created_by")
    context = {"team": team, "form": form, "tokens": tokens, "created": created}
    if request.htmx:
        return render(request, "tenants/tokens.html#create", {**context, "oob": True}, status=status)
    return render(request, "tenants/tokens.html", context, status=status)


def _create(request, *, team: Team | None):
    """GET: the page. POST: a new token shown this once, or 422 with the bound form (and why, over the limit)."""
    form = TokenForm(request.POST or None, team=team)
    if request.method != "POST":
        return _render(request, team=team, form=form)
    if not form.is_valid():
        return _render(request, team=team, form=form, status=422)
    try:
        token, value = token_create(
            name=form.cleaned_data["name"], team=team, user=None if team else request.user,
            max_tier=form.cleaned_data.get("max_tier"), actor=request.user, days=form.cleaned_data["lifetime"],
        )  # fmt: skip
    except TokenLimitReached as error:
        form.add_error(None, str(error))
        return _render(request, team=team, form=form, status=422)
    # Answered, not redirected: after a redirect the value would be gone for good.
    return _render(request, team=team, form=TokenForm(team=team), created=(token, value))


@login_required
@vary_on_headers("HX-Request")
def team_tokens(request, slug: str):
    return _create(request, team=_get_team_for_tokens(request, slug))


@login_required
@vary_on_headers("HX-Request")
def my_tokens(request):
    return _create(request, team=None)


def _revoked(request, token: ApiToken, *, team: Team | None):
    """The token list (htmx) or the page again, saying what was revoked."""
    if request.htmx:
        tokens = tokens_for_team(team) if team else tokens_for_user(request.user).select_related("created_by")
        return render(request, "tenants/tokens.html#list", {"team": team, "tokens": tokens, "revoked": token})
    messages.info(request, f"Revoked token {token.name} ({token.prefix}…); it no longer authenticates.")
    return redirect("tenants:tokens", slug=team.slug) if team else redirect("tokens:mine")


@login_required
@require_POST
def team_token_revoke(request, slug: str, token_id: int):
    team = _get_team_for_tokens(request, slug)
    token = token_revoke(token=_get_token(tokens_for_team(team), token_id), actor=request.user)
    return _revoked(request, token, team=team)


@login_required
@require_POST
def my_token_revoke(request, token_id: int):
    token = token_revoke(token=_get_token(tokens_for_user(request.user), token_id), actor=request.user)
    return _revoked(request, token, team=None)
