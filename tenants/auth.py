"""REST API authentication by bearer token, the principal a team token acts as, and throttling.

Throttling: in the API, per person (all their user tokens and their session)
or per team (all its team tokens), never per token, since tokens cost nothing
to make; on the pages that submit or preview, per user (`rate_limited`); one
sliding window in the throttle cache.

`Authorization: Bearer gw_...` (or `Token gw_...`). A user token authenticates
as its user; a team token as a `TeamPrincipal`, which belongs to no team
membership table and is never staff: views scope it to its team through
`team_scope(request)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from functools import wraps

from django.conf import settings
from django.core.cache import caches
from django.shortcuts import render
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from portal.addresses import client_address
from tenants.inputs import flag
from tenants.models import ApiToken, Team
from tenants.tokens import token_for_value, token_touch

KEYWORDS = (b"bearer", b"token")


class TeamPrincipal:
    """Who a team token acts as: its team, nobody in particular."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = id = None

    def __init__(self, token: ApiToken):
        self.token = token
        self.team = token.team
        self.username = f"token:{token.name}"

    def __str__(self) -> str:
        return f"API token {self.token.name} of team {self.team.slug}"


class TokenAuthentication(BaseAuthentication):
    """Bearer tokens; answers None (try the next scheme) when no token is sent."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() not in KEYWORDS:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header; send 'Authorization: Bearer <token>' with no spaces in the token."
            )
        try:
            value = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The token contains characters a Gangway token never has.") from None
        token = token_for_value(value)
        if token is None:
            raise exceptions.AuthenticationFailed(
                "Unknown token; check GANGWAY_TOKEN, or ask a team lead for a new one."
            )
        if token.is_revoked:
            raise exceptions.AuthenticationFailed(
                f"Token {token.prefix}... was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC; "
                + ("make a new one on your tokens page." if token.user_id else "ask a team lead for a new one.")
            )
        if token.is_expired:
            raise exceptions.AuthenticationFailed(
                f"Token {token.prefix}... expired on {token.expires_at:%Y-%m-%d %H:%M} UTC; "
                + ("make a new one on your tokens page." if token.user_id else "ask a team lead for a new one.")
            )
        if token.user_id is not None and not token.user.is_active:
            raise exceptions.AuthenticationFailed("The user of this token is deactivated.")
        token_touch(token)
        return (token.user if token.user_id else TeamPrincipal(token)), token

    def authenticate_header(self, request) -> str:
        # Listed first in DEFAULT_AUTHENTICATION_CLASSES, so a request with no
        # credentials gets 401 with this challenge, not 403.
        return 'Bearer realm="api"'


def team_scope(request) -> Team | None:
    """The one team a team token acts for, or None for a person (session or user token)."""
    user = request.user
    return user.team if isinstance(user, TeamPrincipal) else None


def query_flag(request, name: str) -> bool:
    """The query parameter `name` read as a flag (False when absent).

    Raises ValidationError ({name: [sentence]}, a 400) for a value that is not a
    true/false spelling, so a misspelt preview never saves.
    """
    if name not in request.query_params:
        return False
    try:
        return flag(request.query_params[name])
    except ValueError as error:
        raise exceptions.ValidationError({name: [str(error)]}) from None


def request_token(request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


@dataclass(frozen=True)
class Budget:
    """Whose API request budget a request spends: its throttle key, and how a 429 names it."""

    key: str
    whom: str  # "for team maps"
    shared: str  # ", shared by all its tokens"


def request_budget(request) -> Budget | None:
    """Returns the budget of who is behind the request, or None for an anonymous one (counted by address).

    A team token spends its team's budget, shared by all the team's tokens; a
    person spends their own, shared by all their user tokens and their session.
    Keyed on the credential instead, a person with five tokens, or a team's CI
    with three, would get five or three budgets' worth of the web tier.
    """
    team = team_scope(request)
    if team is not None:
        return Budget(key=f"team{team.pk}", whom=f"for team {team.slug}", shared=", shared by all its tokens")
    if request.user and request.user.is_authenticated:
        return Budget(key=f"u{request.user.pk}", whom="for you", shared=", shared by your tokens and your session")
    return None


class TokenRateThrottle(SimpleRateThrottle):
    """A request budget per person or team (`request_budget`), per address for anonymous calls.

    Counts live in the `throttle` cache (Redis in production, shared by every
    worker); the rate is read per request so settings overrides apply at once.

    A sliding window of counters: one count per period (a minute for 600/min),
    and a request is let through while this period's count plus the last
    period's, weighted by the share of it still inside the window, stays under
    the budget. Two small round trips a request (read both counts; count this
    one atomically), where DRF's log of every request's time grew with the
    rate: a list of 12,000 times read, unpickled, pickled and written back on
    each request at 200 requests/s, and two workers writing it at once lost a
    request.
    """

    scope = "token"

    @property
    def cache(self):
        return caches[getattr(settings, "API_THROTTLE_CACHE", "default")]

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request):
        """The client's address, read as login lockouts read it (`portal.addresses`): DRF's own reading
        joins the whole X-Forwarded-For, which a client writes, into a fresh budget per header it makes up."""
        return client_address(request)

    def get_cache_key(self, request, view):
        budget = request_budget(request)
        ident = budget.key if budget else f"a{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        period, elapsed = divmod(self.timer(), self.duration)
        period = int(period)
        current_key, last_key = f"{key}:{period}", f"{key}:{period - 1}"
        counts = self.cache.get_many([last_key, current_key])
        self.last, self.current = counts.get(last_key, 0), counts.get(current_key, 0)
        self.elapsed = elapsed
        if self.last * (1 - elapsed / self.duration) + self.current >= self.num_requests:
            return self.throttle_failure()
        # A count is kept two periods: the next one still weighs it.
        if current_key in counts or not self.cache.add(current_key, 1, 2 * self.duration):
            try:
                self.cache.incr(current_key)
            except ValueError:  # gone in between: this request opens the count again
                self.cache.add(current_key, 1, 2 * self.duration)
        return True

    def wait(self):
        """Seconds until the window holds less than the budget, if no other request comes meanwhile."""
        remaining = self.duration - self.elapsed
        if self.current >= self.num_requests:
            # Next period, this one's count is the last one's; it must weigh less than the budget.
            return remaining + self.duration * max(0.0, 1 - self.num_requests / self.current)
        # This period: the last one's weight must fall below what is left of the budget.
        return self.duration * max(0.0, 1 - (self.num_requests - self.current) / self.last) - self.elapsed


class PageRateThrottle(TokenRateThrottle):
    """The same sliding window, per signed-in user, for the posts of pages that submit or preview (PAGE_RATE)."""

    scope = "page"

    def get_rate(self):
        return settings.PAGE_RATE

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": f"u{request.user.pk}"}


def rate_limited(view):
    """A page view whose posts count against the user's PAGE_RATE; over it, 429 with Retry-After.

    The answer is a page, or for htmx a fragment swapped into the page's alert
    line (the form and what was typed stay as they are). GETs are not counted.
    """

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST" or not request.user.is_authenticated:
            return view(request, *args, **kwargs)
        throttle = PageRateThrottle()
        if throttle.allow_request(request, None):
            return view(request, *args, **kwargs)
        seconds = max(1, round(throttle.wait() or 1))
        context = {"seconds": seconds, "rate": settings.PAGE_RATE}
        if request.htmx:
            response = render(request, "partials/throttled.html", context, status=429)
            response["HX-Retarget"], response["HX-Reswap"] = "#page-alert", "innerHTML"
        else:
            response = render(request, "429.html", context, status=429)
        response["Retry-After"] = str(seconds)
        return response

    return wrapped


# The header that tells a caller when its token expires (RFC 3339, UTC), on every answer to a token that will:
# the CLI warns in its last EXPIRY_WARNING days, so a CI log says so before its jobs stop being submitted.
EXPIRES_HEADER = "Gangway-Token-Expires"


# Mixed into every API view: error messages that say what to do next, and when the caller's token expires. (No
# docstring: the schema would take it as every view's description.)
class ApiDefaults:
    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        token = request_token(request)
        if token is not None and token.expires_at is not None:
            response[EXPIRES_HEADER] = token.expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return response

    def permission_denied(self, request, message=None, code=None):
        if request.authenticators and not request.successful_authenticator:
            raise exceptions.NotAuthenticated(
                "Authentication required: send 'Authorization: Bearer <token>' with a Gangway API token, "
                "or sign in to the portal."
            )
        raise exceptions.PermissionDenied(detail=message, code=code)

    def throttled(self, request, wait):
        seconds = max(1, round(wait or 1))
        budget = request_budget(request)
        whom, shared = (budget.whom, budget.shared) if budget else ("from this address", "")
        refused = exceptions.Throttled(
            detail=f"Too many requests {whom} (at most {api_settings.DEFAULT_THROTTLE_RATES['token']}{shared}); "
            f"retry in {seconds} s.",
        )
        # Set after: given to Throttled, the wait is also appended as DRF's own "Expected available in N seconds.",
        # saying it twice. DRF's exception handler reads it for Retry-After.
        refused.wait = seconds
        raise refused


class TokenScheme(OpenApiAuthenticationExtension):
    """Documents TokenAuthentication in the OpenAPI schema as HTTP bearer."""

    target_class = "tenants.auth.TokenAuthentication"
    name = "token"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gw_ token",
                "description": "A team or user API token: `Authorization: Bearer gw_...`."}  # fmt: skip
