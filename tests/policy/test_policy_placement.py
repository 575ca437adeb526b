"""The placement searches' shortcuts against straightforward references on
random rooms (hypothesis): one replica group placed by reading capacities
lazily, best first, must match computing them all and sorting; counting
replica slots with room given back (the preemption bound) must match
placing the gang on that room, and so must a count kept up to date as room
moves on a few nodes (a victim search's walk and put-back).
"""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.policy import Node
from scheduling.policy.demand import Demand
from scheduling.policy.placement import (
    Capacity, _capacity, _place_group, place, placeable_with,
)
from scheduling.policy.room import Room

PROFILE = settings(
    max_examples=int(os.environ.get("POLICY_EXAMPLES", "150")) * 4, deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow],
)


def _room(rng: random.Random) -> Room:
    """Returns a room of a few nodes, partly used, some overcommitted by
    outside pods (negative free room)."""
    nodes = tuple(Node(f"n{i}", rng.choice((4, 8, 16)), rng.choice((8, 16, 32)),
                       rng.choice((0, 8, 64))) for i in range(rng.randint(1, 12)))
    room = Room(nodes)
    for i, node in enumerate(nodes):
        room.take(i, (rng.randint(0, node.gpu + 1), rng.randint(-2, node.cpu + 2),
                      rng.randint(-1, node.memory)))
    return room


def reference_group(room: Room, count: int, gpu: int, cpu: int, memory: int):
    """Returns R11's placement of one group by computing every node's capacity
    and sorting: most replicas first, then fewest free GPUs, then node order;
    the remainder goes to the best fit among the rest."""
    caps = sorted((-_capacity(room, i, gpu, cpu, memory), free, i)
                  for free, i in room.nodes_from(gpu))
    caps = [c for c in caps if c[0] < 0]
    if sum(-c[0] for c in caps) < count:
        return None
    chosen, left, k = [], count, 0
    while -caps[k][0] < left:
        chosen.append((caps[k][2], -caps[k][0]))
        left += caps[k][0]
        k += 1
    best = min((c for c in caps[k:] if -c[0] >= left), key=lambda c: (c[1], c[2]))
    return chosen + [(best[2], left)]


@PROFILE
@given(st.integers(0, 2**32))
def test_one_group_is_placed_as_the_full_sort_places_it(seed):
    rng = random.Random(seed)
    room = _room(rng)
    count, gpu = rng.randint(1, 8), rng.randint(0, 8)
    cpu, memory = rng.choice((0, 1, 2, 4, 8)), rng.choice((0, 0, 4, 16))
    assert _place_group(room, count, gpu, cpu, memory) == reference_group(
        room, count, gpu, cpu, memory)


@PROFILE
@given(st.integers(0, 2**32))
def test_a_gang_is_placed_whenever_the_nodes_hold_it_however_overcommitted_the_others(seed):
    # A node overcommitted by outside pods (a victim's pods in their grace period) holds no room, and takes
    # none from the others: `place` finds the gang wherever the full sort does.
    rng = random.Random(seed)
    room = _room(rng)
    for i in rng.sample(range(len(room.names)), rng.randint(0, len(room.names))):
        room.take(i, (rng.randint(0, 16), rng.randint(0, 32), rng.randint(0, 64)))
    count, gpu = rng.randint(1, 8), rng.randint(0, 8)
    cpu, memory = rng.choice((0, 1, 2, 4, 8)), rng.choice((0, 0, 4, 16))
    demand = Demand(((count, gpu, cpu, memory),), (count * gpu, count * cpu, count * memory))
    assert (place(room, demand) is None) == (reference_group(room, count, gpu, cpu, memory) is None)


@PROFILE
@given(st.integers(0, 2**32))
def test_the_totals_are_the_free_room_of_the_nodes_none_counting_below_zero(seed):
    rng = random.Random(seed)
    nodes, kinds, room = _used_room(rng)
    for _ in range(rng.randint(0, 20)):
        # Room taken, and room given back, never more than a node has.
        i = rng.randrange(len(nodes))
        top = (nodes[i].gpu - room.gpu[i], nodes[i].cpu - room.cpu[i], nodes[i].memory - room.memory[i])
        if rng.random() < 0.5:
            room.take(i, (rng.randint(0, 12), rng.randint(0, 40), rng.randint(0, 80)))
        else:
            room.give(i, tuple(rng.randint(0, up) for up in top))
        for part, indices in [(room, range(len(nodes))), *((p, p.indices) for p in room.parts)]:
            assert part.total == [sum(max(0, column[i]) for i in indices)
                                  for column in (room.gpu, room.cpu, room.memory)]


@PROFILE
@given(st.integers(0, 2**32))
def test_counting_slots_answers_as_placing_on_the_given_back_room(seed):
    rng = random.Random(seed)
    room = _room(rng)
    # Room given back is room jobs held: no node ends above the largest one.
    freed = {i: [rng.randint(0, max(0, room.top - room.gpu[i])), rng.randint(0, 16),
                 rng.randint(0, 32)]
             for i in rng.sample(range(len(room.names)), rng.randint(0, len(room.names)))}
    count, gpu = rng.randint(1, 8), rng.randint(1, 8)
    cpu, memory = rng.choice((0, 1, 2, 4, 8)), rng.choice((0, 0, 4, 16))
    groups = [(count, gpu, cpu, memory)]
    if rng.random() < 0.25:  # a chief beside the workers: placed by first-fit decreasing
        groups.append((1, rng.randint(0, 4), rng.choice((1, 4)), rng.choice((0, 4))))
    demand = Demand(tuple(groups), tuple(sum(g[0] * g[r] for g in groups) for r in (1, 2, 3)))
    # As the preemption bound gives it: in parts, a node in one or two.
    parts: list[dict[int, list[int]]] = [{} for _ in range(rng.randint(1, 3))]
    for i, v in freed.items():
        if len(parts) > 1 and rng.random() < 0.5:
            cut = [rng.randint(0, x) for x in v]
            parts[0][i] = cut
            parts[rng.randint(1, len(parts) - 1)][i] = [x - y for x, y in zip(v, cut)]
        else:
            rng.choice(parts)[i] = v
    given = [sum(v[r] for v in freed.values()) for r in range(3)]
    counted = placeable_with(room, demand, parts, (given[0], given[1], given[2]))
    free_before = [room.free(i) for i in range(len(room.names))]
    give_back = room.give_many({i: tuple(v) for i, v in freed.items()})
    assert counted == (place(room, demand) is not None)
    give_back()
    assert [room.free(i) for i in range(len(room.names))] == free_before


def _nodes_of_types(rng: random.Random) -> tuple[tuple[Node, ...], tuple[int, ...] | None, list]:
    """Returns a few nodes, half the time of GPU types (-1: none), and room
    to take on each; overcommitted nodes (outside pods) end with negative
    free room."""
    nodes = tuple(Node(f"n{i}", rng.choice((4, 8)), 32, 64) for i in range(rng.randint(1, 12)))
    kinds = None if rng.random() < 0.5 else tuple(rng.choice((-1, 0, 1)) for _ in nodes)
    taken = [[rng.randint(0, node.gpu + 2), rng.randint(0, 34), rng.randint(0, 66)]
             for node in nodes]
    return nodes, kinds, taken


def _used_room(rng: random.Random) -> tuple[tuple[Node, ...], tuple[int, ...] | None, Room]:
    """Returns `_nodes_of_types`' nodes and their room with its room taken."""
    nodes, kinds, taken = _nodes_of_types(rng)
    room = Room(nodes, kinds)
    for i, v in enumerate(taken):
        room.take(i, tuple(v))
    return nodes, kinds, room


def _index(room: Room) -> tuple:
    """Returns everything placement reads of a room: free counts, buckets in
    node order, totals, and the same of each GPU type's part."""
    def one(r: Room) -> tuple:
        return (tuple(r.total), tuple(tuple(r.bucket(b)) for b in range(r.top + 1)))
    return (list(room.gpu), list(room.cpu), list(room.memory), one(room),
            tuple(one(part) for part in room.parts))


@PROFILE
@given(st.integers(0, 2**32))
def test_taking_room_on_every_node_at_once_leaves_the_room_a_take_per_node_leaves(seed):
    rng = random.Random(seed)
    nodes, kinds, taken = _nodes_of_types(rng)
    at_once, one_by_one = Room(nodes, kinds), Room(nodes, kinds)
    at_once.take_all(*(list(column) for column in zip(*taken)))
    for i, v in enumerate(taken):
        one_by_one.take(i, tuple(v))
    assert _index(at_once) == _index(one_by_one)


@PROFILE
@given(st.integers(0, 2**32))
def test_confining_room_to_some_nodes_takes_all_free_room_of_the_others(seed):
    rng = random.Random(seed)
    nodes, kinds, room = _used_room(rng)
    keep = set(rng.sample(range(len(nodes)), rng.randint(0, len(nodes))))
    confined, reference = room.copy(), room.copy()
    part = confined if kinds is None or not confined.parts else confined.parts[0]
    part.confine(keep)
    for i in range(len(nodes)):
        if i not in keep:
            free = reference.free(i)
            reference.take(i, (max(0, free[0]), max(0, free[1]), max(0, free[2])))
    assert _index(confined) == _index(reference)


@PROFILE
@given(st.integers(0, 2**32))
def test_a_count_of_room_given_back_answers_as_placing_the_gang_on_that_room(seed):
    rng = random.Random(seed)
    nodes, kinds, whole = _used_room(rng)
    at = 0 if whole.parts and rng.random() < 0.5 else None
    room = whole if at is None else whole.parts[at]
    count, gpu = rng.randint(1, 6), rng.randint(1, 8)
    cpu, memory = rng.choice((0, 1, 4, 8)), rng.choice((0, 0, 4, 16))
    demand = Demand(((count, gpu, cpu, memory),), (count * gpu, count * cpu, count * memory))
    capacity = Capacity(room, demand)
    untouched = _index(whole)
    given = whole.copy()  # the room as the count sees it, changed for real
    extra: dict[int, list[int]] = {}  # what the count is told was given back
    for _ in range(rng.randint(1, 8)):
        # Victims go and come back: room is given back or taken again on a
        # few nodes of the whole room.
        change = {}
        for i in rng.sample(range(len(nodes)), rng.randint(1, min(3, len(nodes)))):
            # No node ends with more free GPUs than it has.
            up = nodes[i].gpu - given.gpu[i]
            change[i] = (rng.randint(-4, up), rng.randint(-8, 8), rng.randint(-16, 16))
        for i, v in change.items():
            given.give(i, v)
            acc = extra.setdefault(i, [0, 0, 0])
            for r in range(3):
                acc[r] += v[r]
        # The count reads only the nodes of its own room.
        capacity.moved([i for i in change if at is None or kinds[i] == at], extra)
        reference = given if at is None else given.parts[at]
        assert capacity.fits() == (place(reference, demand) is not None)
    assert _index(whole) == untouched


@PROFILE
@given(st.integers(0, 2**32))
def test_a_bucket_lists_its_nodes_in_order_as_nodes_move(seed):
    """Buckets read, then changed by takes and gives, list their nodes in
    node order each time they are read, small buckets and big ones (hundreds
    of nodes with the same free GPUs); a copy's buckets change apart from
    the room's."""
    rng = random.Random(seed)
    room = Room(tuple(Node(f"n{i}", rng.choice((1, 2, 8)), 64000)
                      for i in range(rng.choice((5, 40, 700)))))
    copy = None
    for step in range(300):
        b = rng.randrange(room.top + 1)
        if rng.random() < 0.4:
            assert room.bucket(b) == sorted(room.members[b])
        i = rng.randrange(len(room.names))
        g = rng.randint(0, 2)
        if rng.random() < 0.5:
            if room.gpu[i] >= g:
                room.take(i, (g, 0, 0))
        elif room.gpu[i] + g <= room.top:
            room.give(i, (g, 0, 0))
        if step == 150:
            copy = room.copy()
            frozen = [sorted(m) for m in copy.members]
    assert copy is not None
    for b in range(room.top + 1):
        assert room.bucket(b) == sorted(room.members[b])
        assert copy.bucket(b) == frozen[b]
