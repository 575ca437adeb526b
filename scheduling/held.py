"""A queued job the admission cycle does not offer to the policy this time, and the reason it waits."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Held:
    """A Katib trial beyond its sweep's cap (`sweeps.within_caps`), a job mounting a claim its
    namespace lacks or whose claims could not be read, a job whose tier its team may no longer
    use, or one whose object runs though it was not admitted (`snapshot.build_world`)."""

    reason: str
    code: StrEnum  # a sweeps.SweepCode, or one of the portal's own (jobs.codes.Because)
    # Codes of the same wait as `code` (`sweeps.CAP_WAITS`): a job moving among them goes on waiting.
    alike: frozenset[str] = frozenset()

    def starts_waiting(self, previous_code: str) -> bool:
        """Whether a job whose reason code was `previous_code` starts a new wait here, which its
        timeline records; False when it goes on waiting for the same thing (its reason's numbers may change)."""
        return previous_code != self.code and previous_code not in self.alike
