"""Pieces the random-snapshot strategies of the policy tests share."""

from __future__ import annotations

import random
from dataclasses import replace

from scheduling.policy import Node, PendingJob, ReplicaGroup, RunningJob, Settings, Snapshot, Team, plan


def place_randomly(rng: random.Random, free: dict[str, list[int]], count: int, gpu: int, cpu: int) -> list[str] | None:
    """Nodes for `count` replicas of (gpu, cpu) chosen at random among those with room, taken from `free`.

    Returns None, taking nothing, when some replica finds no room: a running
    job in a snapshot is always whole.
    """
    placed = []
    for _ in range(count):
        fits = [name for name, room in free.items() if room[0] >= gpu and room[1] >= cpu]
        if not fits:
            for name in placed:  # give back what the partial gang took
                free[name][0] += gpu
                free[name][1] += cpu
            return None
        name = rng.choice(fits)
        free[name][0] -= gpu
        free[name][1] -= cpu
        placed.append(name)
    return placed


def random_owner(rng: random.Random, teams) -> tuple[str | None, str | None]:
    """Returns a running job's team and tier, now and then (None, None): outside usage."""
    if rng.random() < 0.15:
        return None, None
    return rng.choice(teams).name, rng.choice(("standard", "experiment", "production"))


TYPE_NAMES = ("l4", "a100", "h100")


def typed_snapshot(rng: random.Random, tiers, types: int = 2):
    """Returns a random snapshot on a cluster of `types` GPU types (cheapest
    first): nodes of each type, quota per type (`gpu:<type>`, some teams
    without one type or without any), running jobs each on nodes of one
    type, pending jobs asking for one type, a list, or nothing."""
    names = TYPE_NAMES[:types]
    nodes = []
    for name in names:
        for i in range(rng.randint(1, 2)):
            nodes.append(Node(f"{name}-{i}", rng.choice((4, 8)), rng.choice((8000, 16000)), 0, name))
    teams = []
    for k in range(rng.randint(1, 3)):
        nominal, borrowing, lending = {}, {}, {}
        for name in names:
            if rng.random() < 0.7:
                nominal[f"gpu:{name}"] = rng.randint(0, 8)
                if rng.random() < 0.4:
                    borrowing[f"gpu:{name}"] = rng.randint(0, 6)
                if rng.random() < 0.3:
                    lending[f"gpu:{name}"] = rng.randint(0, nominal[f"gpu:{name}"])
        if rng.random() < 0.2:
            nominal["cpu"] = rng.choice((4000, 8000))
        teams.append(Team(f"t{k}", nominal, borrowing, lending, rng.choice((1.0, 2.0))))
    now = 5000
    free = {n.name: [n.gpu, n.cpu] for n in nodes}
    running = []
    for k in range(rng.randint(0, 8)):
        name = rng.choice(names)
        # The same lists as `free`: room taken on one type's nodes stays taken.
        of_type = {n.name: free[n.name] for n in nodes if n.gpu_type == name}
        count, gpu, cpu = rng.randint(1, 2), rng.randint(1, 4), rng.choice((0, 1000, 2000))
        placed = place_randomly(rng, of_type, count, gpu, cpu)
        if placed is None:
            continue
        team, tier = random_owner(rng, teams)
        started = rng.randint(0, now)
        running.append(RunningJob(f"r{k}", team, tier, started, (ReplicaGroup(count, gpu, cpu),),
                                  tuple(placed), rng.choice((None, 1000, 8000)),
                                  gpu_type=rng.choice((name, None))))
    pending = []
    for k in range(rng.randint(1, 7)):
        asked = rng.choice(((), (rng.choice(names),), tuple(rng.sample(names, len(names)))))
        pending.append(PendingJob(
            f"p{k}", rng.choice(teams).name, rng.choice([t.name for t in tiers]), rng.randint(0, now),
            (ReplicaGroup(rng.randint(1, 3), rng.randint(0, 4), rng.choice((0, 1000, 4000))),),
            rng.choice((None, 500, 4000)), gpu_type=asked))
    order = tuple(names) if rng.random() < 0.5 else ()
    return Snapshot(now, tuple(nodes), tiers, tuple(teams), tuple(running), tuple(pending),
                    Settings(starvation_after=rng.choice((600, 1800, 100000)),
                             max_reservations=rng.choice((0, 1, 2))),
                    gpu_types=order)



def cordon_some(rng: random.Random, snapshot: Snapshot) -> Snapshot:
    """Returns the snapshot with some of its nodes (none, some or all) taking
    no new pods, cordoned or tainted; running jobs stay where they were."""
    share = rng.choice((0.0, 0.3, 0.6, 1.0))
    nodes = tuple(replace(n, schedulable=False, unschedulable=rng.choice(("cordoned", "tainted maintenance", "")))
                  if rng.random() < share else n for n in snapshot.nodes)
    return replace(snapshot, nodes=nodes)


def uncordoned(snapshot: Snapshot) -> Snapshot:
    """Returns the snapshot with every node taking pods again."""
    return replace(snapshot, nodes=tuple(replace(n, schedulable=True, unschedulable="") for n in snapshot.nodes))


def check_unschedulable_nodes(snapshot: Snapshot, result) -> None:
    """Asserts what nodes that take no new pods may and may not do in a plan:
    no admission or reservation is placed on them; they count for R10 as if
    they took pods (the same rejections, word for word, as with every node
    uncordoned); on a cluster without GPU types, a job waiting for them has
    no estimated start (with types, its other types may give one)."""
    closed = {n.name for n in snapshot.nodes if not n.schedulable}
    for a in result.admit:
        assert closed.isdisjoint(a.nodes), (a, closed)
    for r in result.reservations:
        assert closed.isdisjoint(name for name, _ in r.placement), (r, closed)
    assert plan(uncordoned(snapshot), with_eta=False, with_waits=False).reject == result.reject
    if not any(n.gpu_type for n in snapshot.nodes):
        assert all(w.eta is None for w in result.wait if w.code == "unschedulable"), result.wait
