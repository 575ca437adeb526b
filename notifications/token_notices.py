"""Telling people that an API token expires: once when it enters its last 14 days (`tokens.EXPIRY_NOTICE`), and
once more a day before, so that nobody learns it when CI breaks. A user token's person is told; for a team token,
the team's leads (who make its tokens) and the person who made it while still in the team.

Beat runs `notifications.warn_expiring_tokens` every hour: it makes the notices due (`notices_due`, one row per
token, notice and person, so a second run makes none) and enqueues each still to send; `send` claims one with a
conditional UPDATE, so that two workers never both send it, and records how it went. A notice that failed for a
while is tried again on the next run, up to MAX_TRIES, while its token still authenticates.

No subscription asks for these: a person's choices on the notifications page are about jobs, and an expiring
credential is news to whoever holds it. That page lists the notices made for the person who reads it
(`selectors.recent_token_notices`), the admin every one; `retention.token_notices_prune` deletes one once old and
its token no longer authenticates, never before, so that `notices_due` never makes it again.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from notifications import emails, outcomes
from notifications.attempts import Attempt
from notifications.claims import STALE_CLAIM
from notifications.models import Delivery, TokenNotice
from tenants.models import ApiToken, Membership
from tenants.tokens import EXPIRY_NOTICE, active_tokens

log = logging.getLogger("gangway.notifications")
User = get_user_model()

# How long before its expiry each notice is due, latest last: a token past a notice's window when first seen (a
# 7-day token, or beat stopped for a while) gets only the latest notice it is in.
BEFORE = {TokenNotice.Kind.SOON: EXPIRY_NOTICE, TokenNotice.Kind.LAST_DAY: timedelta(days=1)}
MAX_TRIES = 6  # a notice that failed this many times (one an hour) is given up on


def notices_due(now) -> list[TokenNotice]:
    """Makes the notices due at `now` that were never made: for each token that still authenticates and expires
    within a notice's window (but not within the next, later one), lived longer than that window (a 7-day token
    is never told it has 14 days left) and has no notice of that kind yet, one per person to tell. A token's
    notices are made in one transaction, so that a run stopped midway (a worker killed) leaves none of them and
    the next run makes them all, rather than some, and the token then passed over. Returns those made; one a
    concurrent run made first is left to it (the unique constraint)."""
    kinds = list(BEFORE)
    made = []
    for kind, later in zip(kinds, [*kinds[1:], None]):
        window = BEFORE[kind]
        tokens = active_tokens(ApiToken.objects.filter(expires_at__lte=now + window,
                                                       created_at__lt=F("expires_at") - window))  # fmt: skip
        if later is not None:
            tokens = tokens.filter(expires_at__gt=now + BEFORE[later])
        tokens = tokens.exclude(pk__in=TokenNotice.objects.filter(kind=kind).values("token")).select_related("user")
        for token in tokens:
            with transaction.atomic():
                for user in _told(token):
                    try:
                        with transaction.atomic():
                            made.append(TokenNotice.objects.create(token=token, kind=kind, user=user))
                    except IntegrityError:  # a concurrent run made it first
                        pass
    return made


def _told(token: ApiToken) -> list:
    """Who hears that `token` expires: its person for a user token; for a team token its team's leads and its
    maker while still a member, else, when none of them can be told (a team without a lead whose token an
    operator made with `create_token`), the admins (staff), who make team tokens too. Only active accounts
    with an e-mail address."""
    if token.user_id:
        people = [token.user]
    else:
        memberships = Membership.objects.filter(team=token.team_id).filter(
            Q(role=Membership.Role.LEAD) | Q(user=token.created_by_id)).select_related("user")  # fmt: skip
        people = [membership.user for membership in memberships]
    told = [person for person in people if person.is_active and person.email]
    if not told and token.team_id:
        told = list(User.objects.filter(is_staff=True, is_active=True).exclude(email="").order_by("pk"))
    return told


def give_up_on_dead_tokens() -> int:
    """Records as failed, never sent, the notices still waiting whose token no longer authenticates (revoked or
    expired before a send went through): nothing tries them again, and the notifications page would say
    "pending" for ever. Returns how many."""
    tokens = active_tokens(ApiToken.objects.all()).values("pk")
    return TokenNotice.objects.filter(state=TokenNotice.State.PENDING).exclude(token__in=tokens).update(
        state=TokenNotice.State.FAILED, claimed_at=None, error=NOT_SENT)  # fmt: skip


NOT_SENT = "Not sent: the token was revoked or expired first, or the person's account has no address."


def to_send(now) -> list[int]:
    """The notices still to send at `now` whose token still authenticates: pending, and not held by a worker (or
    held longer than a send could take)."""
    free = Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - STALE_CLAIM)
    tokens = active_tokens(ApiToken.objects.all()).values("pk")
    return list(TokenNotice.objects.filter(free, state=TokenNotice.State.PENDING, token__in=tokens)
                .order_by("created_at", "pk").values_list("pk", flat=True))  # fmt: skip


def send(notice_id: int) -> str:
    """Claims the notice and sends it by e-mail; returns the state it reached, or "skipped" when it was not waiting
    (sent, given up on, or being sent by another worker)."""
    now = timezone.now()
    free = Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - STALE_CLAIM)
    claimed = TokenNotice.objects.filter(free, pk=notice_id, state=TokenNotice.State.PENDING).update(
        claimed_at=now, attempts=F("attempts") + 1)  # fmt: skip
    if claimed != 1:  # another worker has it, or it is done
        return "skipped"
    notice = TokenNotice.objects.select_related("token__team", "user").filter(pk=notice_id).first()
    if notice is None:  # its token was deleted meanwhile
        return "skipped"
    if not notice.token.is_active or not notice.user.is_active or not notice.user.email:
        return _record(notice, TokenNotice.State.FAILED, NOT_SENT)
    error = _email(notice)
    if error is None or isinstance(error, outcomes.AnswerUnknown):
        return _record(notice, TokenNotice.State.SENT, str(error or ""), sent_at=timezone.now())
    log.warning("token notice %s (try %d): %s", notice.pk, notice.attempts, error)
    if error.retry and notice.attempts < MAX_TRIES:
        return _record(notice, TokenNotice.State.PENDING, str(error))  # beat's next run tries it again
    return _record(notice, TokenNotice.State.FAILED, str(error))


def _email(notice: TokenNotice) -> outcomes.SendFailed | outcomes.AnswerUnknown | None:
    """Sends the notice's e-mail; returns None once the mail server took it, else what went wrong (as `deliver`
    tells it: a send the time limit stopped by how far it got, an unforeseen error by its class alone)."""
    attempt = Attempt()
    try:
        emails.send(notice.user.email, *message(notice), attempt=attempt)
    except (outcomes.AnswerUnknown, outcomes.SendFailed) as error:
        return error
    except SoftTimeLimitExceeded:
        return outcomes.cut_short(Delivery.Channel.EMAIL, attempt)
    except Exception as error:  # noqa: BLE001 - recorded and tried again: never left claimed
        log.exception("token notice %s failed unexpectedly", notice.pk)
        return outcomes.SendFailed(f"Sending failed unexpectedly ({type(error).__name__}); the worker's log has "
                                   "the details.", retry=True)  # fmt: skip
    return None


def _record(notice: TokenNotice, state: str, error: str, *, sent_at=None) -> str:
    """Writes how the notice's send went and lets go of its claim; returns its state."""
    TokenNotice.objects.filter(pk=notice.pk).update(state=state, error=error[:2000], sent_at=sent_at, claimed_at=None)
    return state


def message(notice: TokenNotice) -> tuple[str, str]:
    """The subject and plain-text body of the notice: which token (its name, first characters and team), when it
    expires, and how to make a new one."""
    token, expires = notice.token, notice.token.expires_at
    left = expires - timezone.now()
    days = round(left / timedelta(days=1))  # 11 days and 23 hours read as 12 days
    within = "within a day" if left < timedelta(days=1) else f"in {days} day{'s' if days > 1 else ''}"
    when = f"{expires:%Y-%m-%d %H:%M} UTC"
    if token.team_id:
        which = f"API token {token.name} of team {token.team.slug}"
        page = reverse("tenants:tokens", args=[token.team.slug])
        remake = f"A lead of team {token.team.slug} makes a new one on the team's tokens page"
    else:
        which, page = f"Your API token {token.name}", reverse("tokens:mine")
        remake = "Make a new one on your tokens page"
    link = f"{settings.PUBLIC_URL}{page}" if settings.PUBLIC_URL else ""
    subject = f"[Gangway] {which} expires {within}"
    body = (f"{which} ({token.prefix}...) expires on {when}, {within}; from then on it no longer authenticates, and "
            f"whatever uses it (a CI pipeline, a script) is refused. {remake}{f' ({link})' if link else ''}, put it "
            "where this one is used, then revoke this one.\n")
    return subject, body
