"""A job that accepts several GPU types waits for a reason on each: the pages say what the reasons share
once and give each type a line of its own, where the policy's sentence repeats it for every type."""

from __future__ import annotations

import re

import pytest
from django.template import Context, Template
from django.utils.html import escape

from jobs.models import Job
from jobs.reason_lines import ReasonLines, TypeLine, may_name_types, reason_lines

TYPES = ["l4", "a100", "h100"]
QUOTA = "Waiting for quota: needs 8 GPUs; team maps uses {used} of its 4 nominal and may borrow only 4 more " \
        "(its borrowing limit is 4); it starts when jobs of the team free {used} GPUs"  # fmt: skip
AHEAD = "1 earlier job of the team waits for quota too (8 GPUs)"
ROOM = "Waiting for room: needs 8 GPUs, 4 cores and 16 GiB in 1 replica of 8 GPUs; only 2 GPUs free in the cluster"
HELD = "Held for job #3, which has waited 1 h 22 min"
RESERVED = "Reserved 8 GPUs on node-01 from about 20:04 UTC, when job #4 is due to end"

CASES = [
    ("A reason of a cluster without types is said as it is",
     f"{ROOM}.", [], None),
    ("A reason about one type is said as it is",
     f"l4: {ROOM}.", TYPES, None),
    ("The policy's one part for several types is said as it is",
     f"l4, a100: {ROOM}.", TYPES, None),
    ("A reason led by a word that names no type of the cluster is said as it is",
     f"t4: {ROOM}; a100: {HELD}.", TYPES, None),
    ("A sweep's reason, led by no type, is said as it is",
     "Sweep tune-lr holds 0 of its 8 GPUs and its trials ahead of this one ask 8 more; this trial waits.", TYPES, None),
    ("Two quota reasons say their kind and the job's need once, then each type's figures",
     f"l4: {QUOTA.format(used=2)}; a100: {QUOTA.format(used=3)}.", TYPES,
     ReasonLines("Waiting for quota: needs 8 GPUs;", (
         TypeLine("l4", "team maps uses 2 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
                        "it starts when jobs of the team free 2 GPUs;"),
         TypeLine("a100", "team maps uses 3 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
                          "it starts when jobs of the team free 3 GPUs.")))),
    ("A closing sentence every type's reason ends with is said once, after the types' lines",
     f"a100: {QUOTA.format(used=3)}. {AHEAD}; l4: {QUOTA.format(used=2)}. {AHEAD}.", TYPES,
     ReasonLines("Waiting for quota: needs 8 GPUs;", (
         TypeLine("a100", "team maps uses 3 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
                          "it starts when jobs of the team free 3 GPUs;"),
         TypeLine("l4", "team maps uses 2 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
                        "it starts when jobs of the team free 2 GPUs.")), f"{AHEAD}.")),
    ("Reasons of different kinds get a line each, in the job's order of types",
     f"a100: {HELD}; l4: {ROOM}.", TYPES,
     ReasonLines("", (TypeLine("a100", f"{HELD};"), TypeLine("l4", f"{ROOM}.")))),
    ("Types said in the same words share a line, named together",
     f"l4, a100: {HELD}; h100: {ROOM}.", TYPES,
     ReasonLines("", (TypeLine("l4, a100", f"{HELD};"), TypeLine("h100", f"{ROOM}.")))),
    ("Parts the same once put in people's words are said once",
     f"l4: {RESERVED}; a100: {RESERVED}.", TYPES,
     ReasonLines("", (TypeLine("l4, a100", f"{RESERVED}."),))),
    ("A clock time's colon does not end a clause, and a name that begins another is told from it",
     f"a100: {RESERVED}; a100-80g: {HELD}.", ["a100", "a100-80g"],
     ReasonLines("", (TypeLine("a100", f"{RESERVED};"), TypeLine("a100-80g", f"{HELD}.")))),
]  # fmt: skip


@pytest.mark.parametrize("reason, names, laid", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_reason_is_laid_out_by_type(reason, names, laid):
    assert reason_lines(reason, names) == laid


def test_only_a_reason_led_by_names_with_several_parts_may_name_several_types():
    assert may_name_types(f"l4: {HELD}; a100: {ROOM}.") and may_name_types(f"l4, a100: {ROOM}.")
    assert not may_name_types(f"{ROOM}.")  # "; " inside, but led by the policy's capital: no type read
    assert not may_name_types(f"l4: {HELD}.")


@pytest.fixture
def waits_on_both(gpu_types, submit, cycle):
    """maps runs 2 l4 GPUs and 3 a100 GPUs; `either`, 2 replicas of 4 GPUs of any type, waits for quota
    on both: it needs 8, and maps may have only 6 of either."""
    for name, gpus, kind in (("l4-two", 2, "l4"), ("a100-three", 3, "a100")):
        job = submit(name=name, gpu_type=[kind], replicas=[{"role": "Worker", "count": 1, "gpu": gpus}])
    cycle()
    job = submit(name="either", replicas=[{"role": "Worker", "count": 2, "gpu": 4}])
    cycle()
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED and job.reason.count("Waiting for quota: needs 8 GPUs;") == 2, job.reason
    return job


def _laid_out(html: str) -> list[str]:
    """The lead, the types' lines and the tail of each reason laid out by type in `html`, as text."""
    pieces = re.findall(r'<span class="why-(lead|type|tail)">(.*?)</span>(?= |<|$)', html)
    return [f"{kind}: {re.sub(r'<[^>]+>', '', text)}" for kind, text in pieces]


def _row(body: str, row_id: str) -> str:
    found = re.search(rf'<tr id="{row_id}">(.*?)</tr>', body, re.S)
    assert found, f"no row {row_id}"
    return found.group(1)


def test_the_queue_says_what_both_types_share_once(login, staff, waits_on_both, htmx):
    row = _row(login(staff).get("/?part=queue", **htmx).content.decode(), f"queue-row-{waits_on_both.pk}")
    assert row.count("Waiting for quota") == 1 and row.count("needs 8 GPUs") == 1
    assert _laid_out(row) == [
        "lead: Waiting for quota: needs 8 GPUs;",
        "type: l4: team maps uses 2 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
        "it starts when jobs of the team free 2 GPUs;",
        "type: a100: team maps uses 3 of its 4 nominal and may borrow only 4 more (its borrowing limit is 4); "
        "it starts when jobs of the team free 3 GPUs.",
    ]  # fmt: skip


def test_my_jobs_and_the_job_page_and_its_timeline_lay_it_out_too(login, owner, waits_on_both):
    client = login(owner)
    mine = client.get("/jobs/").content.decode()
    page = client.get(f"/jobs/{waits_on_both.pk}/").content.decode()
    reason_big = re.search(r'<p class="reason-big">(.*?)</p>', page, re.S).group(1)
    events = re.findall(r'<p class="ev-message">(.*?)</p>', page, re.S)
    for html in (mine, reason_big, events[-1]):
        assert html.count("Waiting for quota") == 1
        assert [piece.split(":")[0] for piece in _laid_out(html)] == ["lead", "type", "type"]


def test_the_api_and_the_stored_reason_keep_the_policy_s_sentence(login, owner, waits_on_both):
    answer = login(owner).get(f"/api/v1/jobs/{waits_on_both.pk}/").json()
    assert answer["reason"] == waits_on_both.reason
    assert answer["reason"].startswith("l4: Waiting for quota: needs 8 GPUs; ")
    assert "; a100: Waiting for quota: needs 8 GPUs; " in answer["reason"]


def test_a_reason_s_words_are_escaped(gpu_types):
    html = Template("{% load gangway %}{% reason text %}").render(Context({"text": "l4: <b>x</b>; a100: y & z."}))
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "y &amp; z." in html
    assert _laid_out(html) == ["type: l4: &lt;b&gt;x&lt;/b&gt;;", "type: a100: y &amp; z."]


def test_without_types_a_reason_is_said_as_it_is_and_no_type_is_read(login, owner, fill_and_wait,
                                                                      django_assert_max_num_queries):  # fmt: skip
    (job,) = fill_and_wait(1)
    assert "; " in job.reason
    page = Template("{% load gangway %}{% reason text %}")
    with django_assert_max_num_queries(0):
        html = page.render(Context({"text": job.reason}))
    assert html == escape(job.reason) and "why-" not in html
