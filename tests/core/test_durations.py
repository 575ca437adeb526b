"""One way to say how long: reasons, pages and the CLI all read spans the same."""

import pytest

from core.durations import duration


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (-5, "0 s"), (9, "9 s"), (45.4, "45 s"), (59.6, "1 min"), (60, "1 min"), (75, "1 min"),
    (90, "2 min"), (150, "3 min"), (1900, "32 min"), (2400, "40 min"), (3599, "1 h"), (3600, "1 h"), (4000, "1 h 7 min"),
    (7500, "2 h 5 min"), (9000, "2 h 30 min"), (47 * 3600, "47 h"), (48 * 3600, "2 d"), (3 * 86400 + 7200, "3 d"),
], ids=str)
def test_a_span_reads_in_its_largest_useful_unit(seconds, text):
    assert duration(seconds) == text


def test_reasons_pages_and_the_cli_say_the_same():
    from gangway_cli import follow
    from jobs.templatetags import gangway
    from scheduling import records
    from scheduling.policy import cycle

    assert follow.duration is records.duration is cycle.duration is duration
    assert gangway.duration(2400) == "40 min" and gangway.duration(None) == "—"


@pytest.mark.parametrize(("seconds", "text"), [
    (468, "7 min"), (59.9, "59 s"), (3599, "59 min"), (7199, "1 h 59 min"), (48 * 3600 - 1, "47 h 59 min"),
    (3 * 86400 - 1, "2 d"),
], ids=str)
def test_a_bound_rounds_down_so_that_it_holds_as_read(seconds, text):
    assert duration(seconds, at_most=True) == text
