"""A container's log, as the kubelet serves it (bytes, lines ended by "\\n"), turned into lines a person reads.

The kubelet counts lines (`tailLines`) by "\\n" alone, so the lines here are split by "\\n" alone too: a
carriage return, a form feed or a Unicode line separator inside a line keeps it one line, as `kubectl logs`
and a tail count it. A line a progress bar rewrote with "\\r" reads as a terminal last showed it. ANSI
escape sequences (colours, cursor moves, window titles) are removed, and other control characters (binary
garbage) become U+FFFD, as do bytes that are not UTF-8: no page, JSON answer or terminal that prints a line
is steered by what a job wrote.
"""

from __future__ import annotations

import codecs
import re

# CSI (colours, cursor moves), OSC (titles, hyperlinks: up to BEL or ST) and the two-byte escapes.
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # tab stays


def log_lines(data: bytes, *, cut: bool = False) -> tuple[str, ...]:
    """Returns the lines of a log's bytes, oldest first; empty for no bytes.

    With `cut` (the server stopped at its `limitBytes`), a character whose bytes the limit split is
    left out rather than shown as U+FFFD, and the last line, unended, is what was written of it.
    """
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=not cut)
    if not text:
        return ()
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the "\n" that ends the last line starts no line
    return tuple(readable(line) for line in lines)


def readable(line: str) -> str:
    """One line as a terminal would last show it: its last "\\r"-rewritten state, without escape sequences."""
    if "\r" in line:
        line = next((part for part in reversed(line.split("\r")) if part), "")
    return CONTROL.sub("\ufffd", ANSI.sub("", line))
