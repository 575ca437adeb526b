"""A policy sentence as a waiting job's owner reads it (`records.readable_reason`): clock times named
and rounded, bounds rounded down, another team's jobs by their team only, counted."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduling.records import readable_reason

NOW = datetime(2026, 12, 5, 19, 56, 43, tzinfo=timezone.utc)
TEAMS = {"12": "perception", "19": "maps", "22": "maps", "23": "maps", "30": "perception"}


def read(reason: str) -> str:
    return readable_reason(reason, team="perception", teams_of=TEAMS, now=NOW)


@pytest.fixture(autouse=True)
def utc(settings):
    settings.TIME_ZONE = "UTC"


def test_a_moment_is_a_named_clock_time_to_the_nearest_minute():
    start = int(datetime(2026, 12, 5, 20, 4, 31, tzinfo=timezone.utc).timestamp())
    assert read(f"from t={start};") == "from about 20:05 UTC;"
    tomorrow = int(datetime(2026, 12, 6, 8, 0, 10, tzinfo=timezone.utc).timestamp())
    assert read(f"from t={tomorrow}.") == "from about Sun 08:00 UTC."


def test_the_zone_is_the_portals(settings):
    settings.TIME_ZONE = "Asia/Tokyo"
    start = int(datetime(2026, 12, 5, 20, 4, 31, tzinfo=timezone.utc).timestamp())
    assert read(f"from t={start}") == "from about 05:05 JST"  # the same day there as now


def test_a_max_runtime_bound_rounds_down():
    assert read("a max_runtime of at most 468 s lets it start now.") == "a max_runtime of at most 7 min lets it start now."


def test_own_jobs_are_numbers_and_another_teams_are_counted_by_team():
    assert read("when job 12 is due to end") == "when job #12 is due to end"
    assert read("when jobs 12 and 30 are due to end") == "when jobs #12 and #30 are due to end"
    assert read("when jobs 19 and 22 are due to end") == "when 2 jobs of team maps are due to end"
    assert read("when jobs 12, 19 and 22 are due to end") == "when #12 and 2 jobs of team maps are due to end"
    assert read("Held for job 19, which has waited 1 h") == "Held for a job of team maps, which has waited 1 h"


def test_the_jobs_beyond_the_first_three_stay_counted_once():
    assert read("when jobs 19, 22, 23 and 3 more are due to end") == "when 3 jobs of team maps and 3 more are due to end"
    assert read("when jobs 12, 30, 19 and 2 more are due to end") == (
        "when #12, #30, a job of team maps and 2 more are due to end")
    assert read("when jobs 12, 30 and 4 more are due") == "when jobs #12, #30 and 4 more are due"
