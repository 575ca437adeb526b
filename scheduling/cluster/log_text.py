"""A container's log, as the kubelet serves it (bytes, lines ended by "\\n"), turned into lines a person reads.

The kubelet counts lines (`tailLines`) by "\\n" alone, so the lines here are split by "\\n" alone too: a
carriage return, a form feed or a Unicode line separator inside a line keeps it one line, as `kubectl logs`
and a tail count it. A line a progress bar rewrote with "\\r" reads as a terminal last showed it. ANSI
escape sequences (colours, cursor moves, window titles) are removed, and other control characters (binary
garbage) become U+FFFD, as do bytes that are not UTF-8: no page, JSON answer or terminal that prints a line
is steered by what a job wrote. A log passed on whole (a download) is read the same way as it streams
(`StreamedLines`), holding a chunk and one line at a time; a download read on from a line leaves out the lines
before it uncleaned (`SkippedLines`), each line reading the same whatever came before it.

Read with `timestamps=true`, each line comes after its time; `timed_log_lines` parts them, and a position
(`LogPosition`: a time, and how many lines of that time) says where a reader stopped, so that the next read
gives the lines after it, each once, however often their text repeats.
"""

from __future__ import annotations

import codecs
import hashlib
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
DIGEST_CHARS = 16  # hex digits of a line's digest (`line_digest`)


def line_digest(line: str) -> str:
    """The first DIGEST_CHARS hex digits of the SHA-256 of a line as a person reads it (UTF-8, without its
    "\\n"): how a download names the last line it gave, so that a read on from there starts only where that
    line still is (`?last=`)."""
    return hashlib.sha256(line.encode()).hexdigest()[:DIGEST_CHARS]


class StreamedLines:
    """`log_lines` for a log read in chunks, however long: `feed` each chunk's bytes and then `end`; each
    returns the text of the lines it completed, each line as `readable` reads it and ended by "\\n".

    The whole log fed in any chunks reads as `log_lines` reads it at once (a last line without "\\n" gets one).
    Only the line not yet ended is held: of a line a progress bar rewrites with "\\r", the state a terminal
    would show; and past `hold` characters, what came of the line goes out as it is read (each part read by
    itself, a "\\r" after it no longer taking it back). `count` is how many lines have been ended, from
    `start` (the lines of the log before the first fed), and `last` the `line_digest` of the last of them.
    """

    def __init__(self, *, hold: int = LINE_HOLD, start: int = 0, last: str = ""):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.open = ""  # the line not yet ended
        self.under_way = False  # a part of that line was passed on already
        self.hold = hold
        self.count, self.last = start, last
        self._parts = hashlib.sha256()  # the parts of the line under way passed on so far

    def feed(self, data: bytes) -> str:
        return self._lines(self.decoder.decode(data))

    def end(self) -> str:
        """The text of the last lines (the one not ended gets its "\\n"); "" when everything was passed on."""
        text = self._lines(self.decoder.decode(b"", final=True))
        if not (self.open or self.under_way):
            return text
        last = readable(self.open)
        self._ended([last])
        self.open, self.under_way = "", False
        return text + last + "\n"

    def _lines(self, text: str) -> str:
        *ended, self.open = (self.open + text).split("\n")
        out = ""
        if ended:
            lines = [readable(line) for line in ended]
            out = "".join(line + "\n" for line in lines)
            self._ended(lines)
            self.under_way = False
        if "\r" in self.open:
            # What readable would show of the line so far, kept as a rewrite: later text still rewrites it.
            before, _, after = self.open.rpartition("\r")
            shown = after or next((part for part in reversed(before.split("\r")) if part), "")
            self.open = "\r" + shown + ("" if after else "\r")
        if len(self.open) > self.hold:
            part = readable(self.open)
            self._parts.update(part.encode())
            out, self.open, self.under_way = out + part, "", True
        return out

    def _ended(self, lines: list[str]) -> None:
        """Counts `lines`, just ended, and digests the last (with the parts of it passed on before)."""
        self.count += len(lines)
        if len(lines) == 1 and self.under_way:
            self._parts.update(lines[0].encode())
            self.last = self._parts.hexdigest()[:DIGEST_CHARS]
        else:
            self.last = line_digest(lines[-1])
        self._parts = hashlib.sha256()


class SkippedLines:
    """The first `count` lines of a log read in chunks, left out, as a download read on from a line leaves
    them: `feed` each chunk's bytes, which returns those after the lines left out (b"" while some remain),
    and `end` once the log ended.

    Lines are counted at "\\n" alone, as the kubelet and StreamedLines count them, and each line reads the same
    whatever came before it, so what follows reads as the lines from `count` on of a read of the whole log.
    The lines are counted, not read, except the last, which is read as StreamedLines reads it for its digest
    (`last`): a reader checks that it is the line it got there. `remaining` is how many are still to come.
    """

    def __init__(self, count: int):
        self.remaining = count
        self.last = ""  # line_digest of the last line left out, once it was
        self._line = StreamedLines()  # that line, as a person reads it
        self._unended = False  # a line before it has begun and not ended

    def feed(self, data: bytes) -> bytes:
        if self.remaining > 1:
            found = data.count(b"\n")
            if found < self.remaining - 1:
                self.remaining -= found
                self._unended = not data.endswith(b"\n") if data else self._unended
                return b""
            at = -1
            for _ in range(self.remaining - 1):
                at = data.index(b"\n", at + 1)
            data, self.remaining = data[at + 1 :], 1
        if self.remaining == 1:
            at = data.find(b"\n")
            self._line.feed(data if at < 0 else data[: at + 1])
            if at < 0:
                return b""
            data, self.remaining, self.last = data[at + 1 :], 0, self._line.last
        return data

    def end(self) -> None:
        """The log ended: a last line without its "\\n" counts as one, as StreamedLines ends it."""
        if self.remaining == 1 and self._line.end():
            self.remaining, self.last = 0, self._line.last
        elif self.remaining > 1 and self._unended:
            self.remaining -= 1


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
