"""Pieces the random-snapshot strategies of the policy tests share."""

from __future__ import annotations

import random


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
