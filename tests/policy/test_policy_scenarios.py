"""Scenario tables: every file under scenarios/ is a list of cases whose ids
are sentences, each a snapshot and the plan expected for it.

A file holds `{"rule": ..., "defaults": {...}, "scenarios": [...]}`; the
defaults fill snapshot fields a scenario leaves out. `expect` lists admitted,
waiting and rejected jobs: each list must hold exactly those ids (a missing
list means none), and every field given for a job must match. `reservations`,
when given, must be the plan's reservations exactly; `teams`, when given, lists
teams whose every given GPU figure must match.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduling.policy import plan, plan_to_dict, snapshot_from_dict

SCENARIOS = Path(__file__).parent / "scenarios"


def _cases():
    for path in sorted(SCENARIOS.glob("*.json")):
        table = json.loads(path.read_text())
        for case in table["scenarios"]:
            snapshot = {**table.get("defaults", {}), **case["snapshot"]}
            yield pytest.param(snapshot, case["expect"], id=case["id"])


CASES = list(_cases())


def test_a_reservation_names_the_node_of_each_replica():
    table = json.loads((SCENARIOS / "r04_reservations.json").read_text())
    example = {**table["defaults"], **table["scenarios"][0]["snapshot"]}
    (reservation,) = plan(snapshot_from_dict(example)).reservations
    assert (reservation.id, reservation.nodes) == ("a-big", ("n1", "n2"))


@pytest.mark.parametrize(("snapshot", "expect"), CASES)
def test_scenario(snapshot, expect):
    got = plan_to_dict(plan(snapshot_from_dict(snapshot)))
    for kind in ("admit", "wait", "reject"):
        wanted = expect.get(kind, [])
        by_id = {entry["id"]: entry for entry in got[kind]}
        assert sorted(by_id) == sorted(e["id"] for e in wanted), f"{kind}: {got}"
        for entry in wanted:
            actual = by_id[entry["id"]]
            for key, value in entry.items():
                assert actual[key] == value, f"{kind} {entry['id']} {key}: {actual}"
    if "reservations" in expect:
        assert got["reservations"] == sorted(expect["reservations"], key=lambda r: r["id"])
    figures = {entry["team"]: entry for entry in got["teams"]}
    for entry in expect.get("teams", []):
        actual = figures[entry["team"]]
        assert {key: actual[key] for key in entry} == entry, f"teams: {got['teams']}"


def test_tables_cover_every_rule_three_times():
    counts: dict[str, int] = {}
    for path in SCENARIOS.glob("*.json"):
        table = json.loads(path.read_text())
        for case in table["scenarios"]:
            for rule in case.get("rules", [table["rule"]]):
                counts[rule] = counts.get(rule, 0) + 1
    # R13 (stuck admissions) is the loop's, not the policy's.
    for rule in [f"R{n}" for n in (*range(1, 13), 14)]:
        assert counts.get(rule, 0) >= 3, (rule, counts)
    assert len(CASES) >= 50
