"""A progress bar on stderr, redrawn at most a few times a second."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def bar(label: str, stream: TextIO | None = None, every: float = 0.5,
        clock: Callable[[], float] = time.monotonic) -> Callable[[int, int], None]:
    """Returns `progress(done, total)` drawing `label [#####.....] 48% 12,345/25,000 jobs 31 s`."""
    out = stream or sys.stderr
    began = clock()
    shown = [began - every]

    def progress(done: int, total: int) -> None:
        now = clock()
        if now - shown[0] < every and done < total:
            return
        shown[0] = now
        share = done / total if total else 1.0
        filled = int(share * 30)
        out.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {share:4.0%} "
                  f"{done:,}/{total:,} jobs {now - began:4.0f} s")
        if done >= total:
            out.write("\n")
        out.flush()

    return progress
