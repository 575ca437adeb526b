"""R14's learned estimate: one rule, read by the loop's snapshot and by the replay alike."""

import pytest

from scheduling.policy.runtime import learned_estimate


@pytest.mark.parametrize("latest, expected", [
    ([], None),
    ([600], None),
    ([600, 1200], 900),
    ([100, 200, 300, 400, 500], 300),
    ([90000, 100000], 86400),
], ids=[
    "no success learns nothing",
    "one success is not enough",
    "two successes give their median",
    "five successes give their median",
    "an estimate never exceeds the default runtime",
])
def test_an_estimate_is_the_median_of_the_latest_successes(latest, expected):
    assert learned_estimate(latest, 86400) == expected
