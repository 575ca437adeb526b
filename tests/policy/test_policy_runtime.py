"""R14's learned estimate: one rule, read by the loop's snapshot and by the replay alike."""

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy.runtime import learned_estimate, merge_ends


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


ENDS = st.lists(st.tuples(st.integers(0, 20), st.text(max_size=2)))


@given(ENDS, ENDS)
def test_merged_ends_come_as_heapq_merge_gives_them(first, second):
    first, second = sorted(first), sorted(second)
    assert list(merge_ends(iter(first), second)) == list(heapq.merge(first, second))


def test_merging_ends_reads_the_first_only_as_far_as_the_caller_goes():
    read = []

    def first():
        for end in ((1, "a"), (3, "b"), (5, "c")):
            read.append(end)
            yield end

    merged = merge_ends(first(), [(2, "x"), (3, "a")])
    assert [next(merged), next(merged), next(merged)] == [(1, "a"), (2, "x"), (3, "a")]
    assert read == [(1, "a"), (3, "b")]


def test_a_reservations_end_merges_among_job_ends_by_time_then_as_tuples_compare():
    """The reservation search merges job ends (end, id) with holds' ends
    (end, "", number): a job's id is never empty, so at the same time a
    hold's end comes first, as heapq.merge would give it."""
    jobs = [(5, "a"), (7, "b"), (7, "c")]
    holds = [(7, "", 0), (9, "", 1)]
    assert list(merge_ends(iter(jobs), holds)) == list(heapq.merge(jobs, holds)) == [
        (5, "a"), (7, "", 0), (7, "b"), (7, "c"), (9, "", 1)]
