"""Every team is told apart from every other by its colour and its mark together, however many teams there
are up to a hundred: ten colours and ten marks, and the pairs repeat only after all hundred are taken."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobs.templatetags.gangway import COLOURS, MARKS, team_css
from tests.conftest import make_team

CSS = (Path(__file__).resolve().parents[2] / "static" / "css" / "gangway.css").read_text()
# After maps, made first: twelve teams.
SLUGS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]


def test_the_first_hundred_teams_each_have_a_colour_and_mark_of_their_own():
    pairs = [team_css(rank) for rank in range(COLOURS * MARKS)]
    assert len(set(pairs)) == COLOURS * MARKS == 100
    assert pairs[:10] == [f"t{k} m{k}" for k in range(10)]  # the first ten teams keep the looks they had
    assert pairs[10:13] == ["t0 m1", "t1 m2", "t2 m3"]  # the eleventh shares the first's colour, not its mark
    assert team_css(100) == team_css(0)


def test_the_style_sheet_draws_every_colour_and_mark_and_the_ink_of_each_colour_s_marks():
    for k in range(COLOURS):
        assert re.search(rf"\.t{k} {{ --team: #[0-9a-f]{{6}}; }}", CSS), f".t{k} has no colour"
        inked = [rule for rule in re.findall(r"([^{}]*)\{ --mark-ink:", CSS) if re.search(rf"\.t{k}\b", rule)]
        assert len(inked) == 1, f".t{k}'s marks have no ink, or two"
    for k in range(MARKS):
        assert re.search(rf"^\.m{k} {{ --mark: ", CSS, re.M), f".m{k} draws no mark"
    assert not re.search(r"\.t\d \{[^}]*--mark:", CSS)  # a colour draws no mark of its own: its pair's mark does


@pytest.fixture
def twelve_teams(teams_holding_a_gpu):
    """Twelve teams, each holding 1 GPU of the two nodes."""
    teams_holding_a_gpu(SLUGS, gpu=2)


def test_twelve_teams_carry_twelve_pairs_on_the_bars_the_map_and_its_legend(login, staff, twelve_teams):
    body = login(staff).get("/").content.decode()
    bar = r'<div class="team-bar ([^"]+)">.*?<a href="/teams/([^/]+)/"'
    bars = {slug: css for css, slug in re.findall(bar, body, re.S)}
    cells = {slug: css for css, slug in re.findall(r'<span class="(t\d m\d)" title="([^:]+): ', body)}
    legend = {slug: css for css, slug in re.findall(r'<li><i class="swatch ([^"]+)"></i>([^<]+)</li>', body)}
    assert len(bars) == 12 and len(set(bars.values())) == 12, bars
    assert cells == bars and legend == bars  # one team, one pair, wherever it is drawn
    assert bars["maps"] == "t0 m0" and bars["juliet"] == "t0 m1"  # first and eleventh made: one colour, two marks


def test_a_team_s_page_and_chips_carry_its_pair(login, staff, twelve_teams):
    client = login(staff)
    assert '<div class="page-head t0 m1">' in client.get("/teams/juliet/").content.decode()
    assert '<span class="chip t0 m1"><i class="swatch"></i>juliet</span>' in client.get("/teams/").content.decode()


def test_a_new_team_whose_slug_sorts_first_leaves_every_other_team_its_pair(login, staff, tiers, maps, vision,
                                                                           submit, cycle):
    """A team keeps its colour and mark as teams are added: aardvark, made last, comes last, though its slug
    sorts before every other."""
    one_gpu = [{"role": "Worker", "count": 1, "gpu": 1}]
    cycle()
    submit(name="maps-one", replicas=one_gpu)
    submit(name="vision-one", team=vision, user=staff, replicas=one_gpu)
    cycle()
    client = login(staff)

    def pairs() -> dict[str, str]:
        body = client.get("/").content.decode()
        bars = {slug: css for css, slug in re.findall(r'<div class="team-bar ([^"]+)">.*?<a href="/teams/([^/]+)/"',
                                                      body, re.S)}  # fmt: skip
        cells = {slug: css for css, slug in re.findall(r'<span class="(t\d m\d)" title="([^:]+): ', body)}
        assert cells == {slug: bars[slug] for slug in cells}  # the map agrees with the bars
        return bars

    before = pairs()
    assert before == {"maps": "t0 m0", "vision": "t1 m1"}
    make_team("aardvark", tiers, gpu=1)
    after = pairs()
    assert {slug: after[slug] for slug in before} == before
    assert after["aardvark"] == "t2 m2"
    chips = client.get("/teams/").content.decode()
    assert '<span class="chip t0 m0"><i class="swatch"></i>maps</span>' in chips
    assert '<span class="chip t1 m1"><i class="swatch"></i>vision</span>' in chips
    assert '<div class="page-head t1 m1">' in client.get("/teams/vision/").content.decode()
