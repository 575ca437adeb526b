"""An unknown estimated start says why on hover, by the job's reason: not planned yet, left out of the plan, or
waiting on jobs with no end in sight."""

from __future__ import annotations

import pytest

from jobs.codes import Because
from jobs.templatetags.gangway import NO_ETA_HELD, NO_ETA_IN_PLAN, eta
from scheduling.policy.reasons import Code
from scheduling.sweeps import SweepCode


@pytest.mark.parametrize(("code", "why"), [
    (Because.NEW, "Not planned yet: the next admission cycle places it, or says why it waits."),
    (Because.CLUSTER_UNREACHABLE, "Not planned while the cluster cannot be read."),
    (Code.NOTHING_TO_BORROW, NO_ETA_IN_PLAN),
    (Code.NO_RESERVATION, NO_ETA_IN_PLAN),
    ("", NO_ETA_IN_PLAN),
    (SweepCode.SWEEP_CAP, NO_ETA_HELD),
    (Because.TIER_NOT_ALLOWED, NO_ETA_HELD),
    (Because.BACKOFF, NO_ETA_HELD),
])  # fmt: skip
def test_an_unknown_start_says_why(code, why):
    assert eta(None, code) == f'<span class="muted" title="{why}">unknown</span>'


def test_a_new_jobs_page_says_it_is_not_planned_yet(login, owner, submit):
    job = submit()
    assert "Not planned yet: the next admission cycle places it" in login(owner).get(f"/jobs/{job.pk}/").content.decode()
