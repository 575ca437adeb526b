"""Trace replay in virtual time: the same admission policy as the loop, on a
simulated cluster, compared with the policies shared clusters use today.

Imports no Django (like `scheduling.policy`), so benchmarks and tests run it
without settings; `manage.py replay` is a thin shell around `run`.
"""

from .engine import Cluster, Entry, replay
from .metrics import COLUMNS, Outcome, summarize, summarize_teams
from .policies import POLICIES
from .trace import BadRow, Trace, TraceError, TraceJob, read_teams, read_trace, synthetic
from .world import World, build_world

__all__ = [
    "COLUMNS", "POLICIES", "BadRow", "Cluster", "Entry", "Outcome", "Trace", "TraceError",
    "TraceJob", "World", "build_world", "read_teams", "read_trace", "replay", "summarize",
    "summarize_teams", "synthetic",
]
