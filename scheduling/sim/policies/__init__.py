"""The policies a replay compares, in one registry: name -> constructor.

Each constructor takes the `World` and returns a fresh policy (policies keep
their own queues, so one per replay). Those in `TUNED` also take the
settings to replay `plan` under (`TUNABLE` names which may change).
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import Policy
from ..world import World
from .fifo import isolated_fifo, isolated_sjf, pooled_fifo
from .kube import KubeDefault
from .planner import TUNABLE, gangway, gangway_hold, kueue_like

POLICIES: dict[str, Callable[[World], Policy]] = {
    "kube-default": KubeDefault.of,
    "isolated-fifo": isolated_fifo,
    "isolated-sjf": isolated_sjf,
    "pooled-fifo": pooled_fifo,
    "kueue-like": kueue_like,
    "gangway": gangway,
    "gangway-hold": gangway_hold,
}

TUNED = ("gangway", "gangway-hold")

__all__ = ["POLICIES", "TUNABLE", "TUNED"]
