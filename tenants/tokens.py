"""API tokens: create (the value is returned once), revoke, and look up by value.

Only the SHA-256 of a token is stored, so a database dump leaks no credential;
the first characters are kept to tell tokens apart in lists. A person holds at
most USER_TOKEN_LIMIT active user tokens. A token lives for the days it was
created with (never expiring when none were given and TOKEN_MAX_LIFETIME is 0);
an expired one no longer authenticates, and no longer counts as active.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from portal.compiled import CompiledQuery, columns, instance
from portal.database_errors import READ_ONLY
from tenants.models import ApiToken, AuditEntry, PriorityTier, Team

log = logging.getLogger("gangway.tokens")

# last_used_at is written at most this often per token: one UPDATE a minute, not one per request.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# What a token's name may be (the API and the pages check it alike): words, dots, @, + and -, single spaces.
TOKEN_NAME = r"^[\w.@+-]+( [\w.@+-]+)*$"


# The lifetimes the token pages offer, in days; None never expires (offered while TOKEN_MAX_LIFETIME is 0).
LIFETIMES: tuple[tuple[int | None, str], ...] = ((7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year"),
                                                 (None, "Never"))  # fmt: skip
# A team's leads read on its page which of its tokens expire within this (the CLI warns as long before).
EXPIRY_NOTICE = timedelta(days=14)
LONGEST_LIFETIME = 3650  # days: ten years, the longest a token may be asked for even with no TOKEN_MAX_LIFETIME


class TokenLimitReached(ValueError):
    """A person already holds USER_TOKEN_LIMIT active user tokens; the message says so in a sentence."""


def lifetime_problem(days: int | None) -> str:
    """Returns why a token may not live `days` (None: never expire), or "" when it may."""
    cap = settings.TOKEN_MAX_LIFETIME
    if days is None:
        return f"Tokens expire after at most {cap} days here (TOKEN_MAX_LIFETIME): choose a lifetime." if cap else ""
    if days < 1:
        return "A token lives at least 1 day."
    if cap and days > cap:
        return f"Tokens expire after at most {cap} days here (TOKEN_MAX_LIFETIME); ask for {cap} days or fewer."
    if days > LONGEST_LIFETIME:
        return f"A token lives at most {LONGEST_LIFETIME} days; ask for no expiry instead."
    return ""


def default_lifetime() -> int | None:
    """The lifetime of a token created without one: TOKEN_MAX_LIFETIME's days, or never when it is 0."""
    return settings.TOKEN_MAX_LIFETIME or None


def active_tokens(tokens):
    """Of `tokens` (a queryset), those that authenticate: neither revoked nor expired."""
    return tokens.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()), revoked_at__isnull=True)


def token_digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _new_value() -> str:
    return ApiToken.PREFIX + secrets.token_urlsafe(32)


def token_create(
    *, name: str, team: Team | None = None, user=None, max_tier: PriorityTier | None = None, actor=None,
    days: int | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its value (the only time the value exists outside the caller's hands), living `days`
    from now (None: never expiring). Callers check `days` with `lifetime_problem` first.

    Exactly one of `team` (a team token) and `user` (a user token) is given.
    Raises TokenLimitReached when the user already holds USER_TOKEN_LIMIT active tokens.
    """
    if (team is None) == (user is None):
        raise ValueError("A token belongs to a team or to a user, not both and not neither.")
    if problem := lifetime_problem(days):
        raise ValueError(problem)
    value = _new_value()
    expires_at = timezone.now() + timedelta(days=days) if days is not None else None
    with transaction.atomic():
        if user is not None:
            _check_token_limit(user)
        token = ApiToken.objects.create(
            name=name, team=team, user=user, max_tier=max_tier if team else None,
            digest=token_digest(value), prefix=value[:10], created_by=actor, expires_at=expires_at,
        )  # fmt: skip
        if team is not None:
            tier = f", up to tier {max_tier.name}" if max_tier else ""
            until = f", expiring {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at else ", never expiring"
            AuditEntry.objects.create(
                actor=actor, team=team, subject="token",
                after={"token": token.prefix, "name": name, "expires_at": expires_at.isoformat() if expires_at else None},
                summary=f"API token {name!r} ({token.prefix}...) created for team {team.slug}{tier}{until}.",
            )  # fmt: skip
    return token, value


def _check_token_limit(user) -> None:
    """Returns nothing while `user` holds fewer than USER_TOKEN_LIMIT active tokens; raises TokenLimitReached otherwise.

    The user's row is locked first (in token_create's transaction), so two creates at once cannot both pass the count.
    """
    get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk").get()
    active = active_tokens(ApiToken.objects.filter(user=user)).count()
    if active >= settings.USER_TOKEN_LIMIT:
        raise TokenLimitReached(
            f"User {user.username} already holds {active} active tokens; one person may hold at most "
            f"{settings.USER_TOKEN_LIMIT} (USER_TOKEN_LIMIT): revoke one no longer in use first."
        )


def token_revoke(*, token: ApiToken, actor=None) -> ApiToken:
    """Revoke the token; returns it, unchanged when it was already revoked."""
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        token.refresh_from_db(fields=["revoked_at"])
        if revoked and token.team_id:
            AuditEntry.objects.create(actor=actor, team_id=token.team_id, subject="token",
                                      before={"token": token.prefix, "name": token.name},
                                      summary=f"API token {token.name!r} ({token.prefix}...) revoked.")  # fmt: skip
    return token


def token_for_value(value: str) -> ApiToken | None:
    """The token with this value (revoked ones included), with its team, user and highest tier; or None.

    Read on every API call, so its SQL is built once (`portal.compiled`): the
    query the ORM compiled each time, a get on the unique digest with the three
    relations selected, cost more CPU than anything else an API call reads.
    The team's tiers (its default among them) are read where a job's tier is
    resolved (`tier_for`).
    """
    rows = _TOKEN_BY_DIGEST(token_digest(value))
    if not rows:
        return None
    values = iter(rows[0])
    token, *related = (
        instance(model, [next(values) for _ in model._meta.concrete_fields]) for model in _token_models()
    )
    token.team, token.user, token.max_tier = related  # cached as select_related would, None included
    return token


def _token_models() -> tuple:
    return ApiToken, Team, get_user_model(), PriorityTier


_TOKEN_BY_DIGEST = CompiledQuery(
    lambda digest: ApiToken.objects.filter(digest=digest).order_by().values_list(
        *columns(ApiToken), *columns(Team, "team"), *columns(get_user_model(), "user"),
        *columns(PriorityTier, "max_tier"),
    ),
    "0" * 64,
)  # fmt: skip


def token_touch(token: ApiToken) -> None:
    """Record that the token was used, at most once per LAST_USED_RESOLUTION.

    A conditional UPDATE, so concurrent requests never queue on one row lock.
    """
    now = timezone.now()
    if token.last_used_at and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    stale = now - LAST_USED_RESOLUTION
    try:
        with transaction.atomic():  # a savepoint: a refusal leaves the request's own transaction usable
            ApiToken.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale), pk=token.pk).update(
                last_used_at=now)  # fmt: skip
    except DatabaseError as error:
        if getattr(error.__cause__, "sqlstate", None) != READ_ONLY:
            raise
        # A database that takes no writes for a while (a failover, a standby): a read is still answered.
        log.warning("token %s was used but its last use could not be written: the database is read-only", token.pk)
        return
    token.last_used_at = now


def expiring_tokens(team: Team, *, within: timedelta = EXPIRY_NOTICE):
    """The team's tokens that still authenticate and expire within `within`, soonest first."""
    return active_tokens(ApiToken.objects.filter(team=team, expires_at__lte=timezone.now() + within)).order_by(
        "expires_at", "id")  # fmt: skip


def tokens_for_team(team: Team):
    return ApiToken.objects.filter(team=team).select_related("max_tier", "created_by")


def tokens_for_user(user):
    return ApiToken.objects.filter(user=user)


