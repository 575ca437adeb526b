"""`python -m scheduling.policy build|status`: compiles the policy with mypyc,
or tells which policy this interpreter runs (native.py)."""

from __future__ import annotations

import argparse
import sys

from . import native


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduling.policy",
        description="Compile the admission policy with mypyc, or tell which policy runs.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="compile the policy as it is now (about a minute), "
                                      "unless a build matches it already")
    commands.add_parser("status", help="say whether this interpreter runs the compiled "
                                       "policy, and why")
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            native.build()
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return 1
        except OSError as error:  # the builds' folder cannot be made or written
            print(f"The policy could not be built in {native.builds()}: {error}", file=sys.stderr)
            return 1
        return 0
    print(f"Policy: {native.REASON}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
