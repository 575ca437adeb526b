"""A queued job the admission cycle does not offer to the policy this time, and the reason it waits."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Held:
    """A Katib trial beyond its sweep's cap (`sweeps.within_caps`), or a job mounting a claim its
    namespace lacks or whose claims could not be read (`snapshot.build_world`)."""

    reason: str
    code: StrEnum  # a sweeps.SweepCode, or one of the portal's own (jobs.codes.Because)
