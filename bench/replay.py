"""Trace replay benchmark: the Philly window of October-November 2017 at loads 1, 4, 8.

    .venv/bin/python -m bench.replay [--load 1 --load 4 ...] [--policy gangway ...] [--out docs/replay]
    .venv/bin/python -m bench.replay --synthetic 70000 --nodes 1000 --team-count 10 --span 7 \
        --load 8 --policy gangway      # the large synthetic cluster instead of the trace

Prints the comparison table and how long each replay took, in wall and CPU
seconds (the targets: gangway x1 under 3 minutes, x8 under 10 minutes on a
2-core machine; CPU seconds tell a busy machine apart from a slow replay).
Reads the traces from ../shared/traces beside the repository, or
GANGWAY_TRACES_DIR, or --trace/--vc.
"""

from __future__ import annotations

import argparse

from scheduling.sim.run import WINDOW, add_arguments, config_from, run
from scheduling.sim.trace import TraceError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    options = vars(parser.parse_args())
    options["load"] = options["load"] or [1.0, 4.0, 8.0]
    options["start"] = options["start"] or WINDOW[0]
    options["until"] = options["until"] or WINDOW[1]
    try:
        result = run(config_from(options))
    except TraceError as error:
        parser.error(str(error))
    print(result.table)
    print("| policy | load | replay time | CPU time |")
    print("|---|--:|--:|--:|")
    for load, outcome, seconds, cpu in result.outcomes:
        print(f"| {outcome.policy} | x{load:g} | {seconds:.1f} s | {cpu:.1f} s |")


if __name__ == "__main__":
    main()
