"""The CLI warns, once, on standard error, when the portal says its token expires within EXPIRY_WARNING_DAYS;
an expired token exits with the portal's sentence saying when it expired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gangway_cli.client import expiry_warning
from tenants.tokens import token_create

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("header, said", [
    ("2026-12-20T12:00:00Z", "expires 2026-12-20 12:00 UTC (in 13 days)"),
    ("2026-12-08T12:00:00Z", "(in 1 day)"),
    ("2026-12-07T18:00:00Z", "(in less than a day)"),
])  # fmt: skip
def test_a_token_expiring_within_two_weeks_is_warned_of(header, said):
    sentence = expiry_warning(header, "gw_abcdefghijk", now=NOW)
    assert said in sentence and sentence.startswith("warning: token gw_abcdefg... expires")
    assert "set GANGWAY_TOKEN" in sentence


def test_the_warning_says_where_either_kind_of_token_is_made():
    """The answer does not say whether the token is a user's or a team's: a user token's person makes its
    successor, where a team token's comes from a lead."""
    sentence = expiry_warning("2026-12-20T12:00:00Z", "gw_abcdefghijk", now=NOW)
    assert ("make a new one before then (a user token on your tokens page, a team token by a team lead on the "
            "team's tokens page)") in sentence


@pytest.mark.parametrize("header", [None, "", "2026-12-22T12:00:01Z", "next tuesday"])
def test_no_warning_without_an_expiry_soon(header):
    assert expiry_warning(header, "gw_abcdefghijk", now=NOW) == ""


def test_the_cli_warns_once_of_a_token_that_expires_soon(gangway, maps, transactional_db):
    _, value = token_create(name="ci-soon", team=maps, days=3)
    result = gangway("queue", token=value)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "expires" in line]
    assert len(warnings) == 1 and "(in 3 days)" in warnings[0] and warnings[0].startswith("gangway: warning: token")


def test_the_cli_says_nothing_of_a_token_far_from_expiring(gangway, maps, transactional_db):
    _, value = token_create(name="ci-later", team=maps, days=90)
    result = gangway("queue", token=value)
    assert result.returncode == 0 and "expires" not in result.stderr


def test_an_expired_token_exits_with_the_portals_sentence(gangway, maps, transactional_db):
    from tenants.models import ApiToken

    token, value = token_create(name="ci-old", team=maps, days=3)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=datetime.now(UTC) - timedelta(hours=1))
    result = gangway("queue", token=value)
    assert result.returncode != 0
    assert f"Token {token.prefix}... expired on " in result.stderr and "ask a team lead for a new one" in result.stderr
