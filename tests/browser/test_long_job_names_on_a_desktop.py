"""A job's name may be 50 characters long. On a desktop (1440, 1366, 1280 and 1024 px wide) the team page's
jobs table fits its card, as do the same table on My jobs and the dashboard's queue: a long name wraps in its
cell rather than push the table into scrolling sideways in its box, and its one link still carries the whole
name."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUNS = "imagenet-resnet50-baseline-cosine-warmup-lr-sweep7"  # breaks at its hyphens
WAITS = "transformerpretrainingonthefullcorpuswithlongwarmu"  # one word: breaks anywhere
WIDTHS = [1440, 1366, 1280, 1024]
# Each page with the long names it lists: the dashboard's queue only the waiting job's.
PAGES = {"team": ("/teams/maps/", (RUNS, WAITS)), "my-jobs": ("/jobs/", (RUNS, WAITS)), "dashboard": ("/", (WAITS,))}

# Each table box shown: its table's class, how wide the table is and how wide the box shows it.
TABLE_BOXES = """() => [...document.querySelectorAll('.table-wrap')].filter((box) => box.offsetParent)
  .map((box) => [box.firstElementChild.className, box.scrollWidth, box.clientWidth])"""
# Each job's link: its words, where it ends, and where its cell and the table's box end.
LINKS = """() => [...document.querySelectorAll('td.job a')].map((a) => [a.textContent,
  a.getBoundingClientRect().right, a.closest('td').getBoundingClientRect().right,
  a.closest('.table-wrap').getBoundingClientRect().right])"""


@pytest.fixture
def long_names(owner, submit, cycle):
    """maps runs a job of 16 GPUs with a 50-character name; another, one word of 50 characters, waits."""
    assert len(RUNS) == len(WAITS) == 50
    cycle()
    runs = submit(name=RUNS, replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    waits = submit(name=WAITS, replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    submit(name="short", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    cycle()
    return {RUNS: runs, WAITS: waits}


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_job_name_wraps_and_the_jobs_table_fits_its_card(page_at, owner, long_names, width, shot):
    page = sign_in(page_at({"width": width, "height": 900}), owner)
    for name, (path, names) in PAGES.items():
        page.goto(path)
        page.wait_for_load_state("networkidle")
        shot(page, f"long-job-names-{name}-{width}")
        scrolled = [(table, wide, shown) for table, wide, shown in page.evaluate(TABLE_BOXES) if wide > shown]
        assert not scrolled, f"{name} at {width}px: tables scroll sideways in their boxes: {scrolled}"
        for text, right, cell, box in page.evaluate(LINKS):
            assert right <= cell + 0.5 and cell <= box + 0.5, f"{text} ends at {right:.0f}px, its cell at {cell:.0f}px"
        for job_name in names:
            link = page.get_by_role("link", name=job_name, exact=True)  # the whole name, one link
            expect(link).to_be_visible()
            assert link.get_attribute("href") == f"/jobs/{long_names[job_name].pk}/"
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, f"{name} spills sideways"


# Each piece of each owner cell shown (its words, split again at their hyphens, where a line may break): its
# text and how many lines it takes.
OWNER_PIECES = """() => [...document.querySelectorAll('td.owner')].filter((td) => td.offsetParent).flatMap((td) => {
  const text = td.firstChild; const pieces = [];
  for (const match of text.data.matchAll(/[^ -]+/g)) {
    const range = document.createRange(); range.setStart(text, match.index); range.setEnd(text, match.index + match[0].length);
    pieces.push([match[0], new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size]);
  }
  return pieces; })"""


@pytest.mark.parametrize("width", [1366, 1280])
def test_a_katib_trial_s_owner_wraps_between_its_words(page_at, owner, maps, submit, cycle, width, shot):
    """An adopted job's owner is where it came from, shown whole: it wraps at its spaces and hyphens, never
    inside "experiment" as a column squeezed to a few letters by a long reason beside it did."""
    cycle()
    submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    trial = submit(name="tune-lr-t005", replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    Job.objects.filter(pk=trial.pk).update(owner=None, submitted_via="katib experiment tune-lr, trial tune-lr-t005",
                                           preemption_count=1)  # its badge, "Preempted, requeued", widens its row
    cycle()
    Job.objects.update(submitted_at=timezone.now() - timedelta(minutes=15))  # "15 minutes ago", as wide as it gets
    page = sign_in(page_at({"width": width, "height": 900}), owner, "/teams/maps/")
    page.wait_for_load_state("networkidle")
    shot(page, f"katib-owner-{width}")
    pieces = page.evaluate(OWNER_PIECES)
    assert ["experiment", 1] in pieces or ["experiment", 2] in pieces, pieces
    split = [piece for piece, lines in pieces if lines > 1]
    assert not split, f"at {width}px these words of an owner break across lines: {split}"
    scrolled = [(table, wide, shown) for table, wide, shown in page.evaluate(TABLE_BOXES) if wide > shown]
    assert not scrolled, f"at {width}px tables scroll sideways in their boxes: {scrolled}"
