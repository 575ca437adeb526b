"""A container's log, as the kubelet serves it (bytes, lines ended by "\\n"), turned into lines a person reads.

The kubelet counts lines (`tailLines`) by "\\n" alone, so the lines here are split by "\\n" alone too: a
carriage return, a form feed or a Unicode line separator inside a line keeps it one line, as `kubectl logs`
and a tail count it. A line a progress bar rewrote with "\\r" reads as a terminal last showed it. ANSI
escape sequences (colours, cursor moves, window titles) are removed, and other control characters (binary
garbage) become U+FFFD, as do bytes that are not UTF-8: no page, JSON answer or terminal that prints a line
is steered by what a job wrote. A log passed on whole (a download) is read the same way as it streams
(`StreamedLines`), holding a chunk and one line at a time.

Read with `timestamps=true`, each line comes after its time; `timed_log_lines` parts them, and a position
(`LogPosition`: a time, and how many lines of that time) says where a reader stopped, so that the next read
gives the lines after it, each once, however often their text repeats.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from datetime import datetime, timezone

from scheduling.cluster.base import LogPosition

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


# The longest part of one line a streamed read holds (in characters) before it passes that part on: a log of one
# endless line (a job that prints progress and never a "\n") would otherwise be held whole.
LINE_HOLD = 1024**2


class StreamedLines:
    """`log_lines` for a log read in chunks, however long: `feed` each chunk's bytes and then `end`; each
    returns the text of the lines it completed, each line as `readable` reads it and ended by "\\n".

    The whole log fed in any chunks reads as `log_lines` reads it at once (a last line without "\\n" gets one).
    Only the line not yet ended is held: of a line a progress bar rewrites with "\\r", the state a terminal
    would show; and past `hold` characters, what came of the line goes out as it is read (each part read by
    itself, a "\\r" after it no longer taking it back).
    """

    def __init__(self, *, hold: int = LINE_HOLD):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.open = ""  # the line not yet ended
        self.under_way = False  # a part of that line was passed on already
        self.hold = hold

    def feed(self, data: bytes) -> str:
        return self._lines(self.decoder.decode(data))

    def end(self) -> str:
        """The text of the last lines (the one not ended gets its "\\n"); "" when everything was passed on."""
        text = self._lines(self.decoder.decode(b"", final=True))
        last, ends = self.open, bool(self.open) or self.under_way
        self.open, self.under_way = "", False
        return text + (readable(last) + "\n" if ends else "")

    def _lines(self, text: str) -> str:
        *ended, self.open = (self.open + text).split("\n")
        if ended:
            self.under_way = False
        out = "".join(readable(line) + "\n" for line in ended)
        if "\r" in self.open:
            # What readable would show of the line so far, kept as a rewrite: later text still rewrites it.
            before, _, after = self.open.rpartition("\r")
            shown = after or next((part for part in reversed(before.split("\r")) if part), "")
            self.open = "\r" + shown + ("" if after else "\r")
        if len(self.open) > self.hold:
            out, self.open, self.under_way = out + readable(self.open), "", True
        return out


# The kubelet's stamp before each line with `timestamps=true`: RFC 3339 with up to nine digits of fraction
# (Go's RFC3339Nano drops trailing zeros), in UTC or the node's offset, then one space.
STAMP = re.compile(rb"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) ")
STAMP_BYTES = 36  # the longest stamp with its space ("+hh:mm" and nine digits), which a line's byte budget adds


def utc_stamp(when: datetime, nanoseconds: int | None = None) -> str:
    """`when` as a log position's time: UTC, nine digits of fraction (its microseconds, or `nanoseconds`), "Z"."""
    fraction = when.microsecond * 1000 if nanoseconds is None else nanoseconds
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}Z"


def timed_log_lines(data: bytes, *, cut: bool = False) -> tuple[tuple[str, str], ...]:
    """Returns (time, line) for each line of a log read with `timestamps=true`, oldest first: the time as
    `utc_stamp` writes it, the line as `log_lines` reads it. A line without a stamp (none should come) takes
    the time of the line before it."""
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    result, last = [], ""
    for index, line in enumerate(raw):
        found = STAMP.match(line)
        if found:
            seconds, fraction, zone = (part.decode() if part else "" for part in found.group(1, 2, 3))
            last = _utc(seconds, fraction, zone)
            line = line[found.end():]
        final = not (cut and index == len(raw) - 1)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(line, final=final)
        result.append((last, readable(text)))
    return tuple(result)


def _utc(seconds: str, fraction: str, zone: str) -> str:
    if zone != "Z":
        seconds = datetime.fromisoformat(seconds + zone).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{seconds}.{fraction.ljust(9, '0')}Z"


def lines_after(timed: Sequence[tuple[str, str]], after: LogPosition) -> tuple[list[tuple[str, str]], bool]:
    """Returns the lines of `timed` (oldest first) written after `after`, and whether `timed` holds the line at
    `after` itself: when it does, nothing was lost between the two (always so from the start of the log)."""
    if not after.time:
        return list(timed), True
    result, same = [], 0
    for when, line in timed:
        if when < after.time:
            continue
        if when == after.time:
            same += 1
            if same <= after.count:
                continue
        result.append((when, line))
    return result, same >= after.count


def position_after(timed: Sequence[tuple[str, str]], start: LogPosition = LogPosition()) -> LogPosition:
    """The position after the last of `timed`, lines that follow `start` with none between: `start` when
    there are none. The lines sharing the last one's time are counted back to `start`; a tail read from
    the start of the log (`start` empty) whose every line shares one time counts only those it read."""
    if not timed:
        return start
    last = timed[-1][0]
    count = 0
    for when, _ in reversed(timed):
        if when != last:
            break
        count += 1
    return LogPosition(last, count + (start.count if last == start.time else 0))
