"""The API's follow cursor: each replica's position after the last line it was given (`LogPosition`: a line's
time and how many lines of that time), from which a follower reads on (`log_cursor`, `read_cursor`,
`positions_of`)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib

from scheduling.cluster.base import LogPosition
from scheduling.logs import JobLogs

# A reader following a job's logs reads on from the cursor of its last answer: each replica's position after
# the last line it was given, as compressed compact JSON in URL-safe base64, opaque to readers so that its shape
# may change. Compressed, since the replicas' times are alike: a cursor of 64 replicas stays well within the
# 4 KB request line a proxy or gunicorn takes.
CURSOR_MAX = 4000  # characters
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
_CURSOR_JSON_MAX = 1_000_000  # bytes, once inflated
_CURSOR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z")
_REPLICA = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def log_cursor(positions: dict[str, LogPosition]) -> str:
    """The cursor that reads on from `positions` (replica name: its position)."""
    data = {name: [position.time, position.count] for name, position in sorted(positions.items())}
    packed = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def read_cursor(text: str) -> dict[str, LogPosition]:
    """The positions a cursor of `log_cursor` holds; raises ValueError for anything else."""
    if len(text) > CURSOR_MAX or not re.fullmatch(CURSOR_PATTERN, text):
        raise ValueError(text)
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), _CURSOR_JSON_MAX)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError(text)
        data = json.loads(raw)
    except (binascii.Error, zlib.error, ValueError) as error:
        raise ValueError(text) from error
    if not isinstance(data, dict):
        raise ValueError(text)
    positions = {}
    for name, value in data.items():
        if not (_REPLICA.fullmatch(name) and isinstance(value, list) and len(value) == 2):
            raise ValueError(text)
        at, count = value
        valid_time = at == "" or (isinstance(at, str) and _CURSOR_TIME.fullmatch(at))
        if not (valid_time and type(count) is int and 0 <= count <= 2**31 and (count > 0) == bool(at)):
            raise ValueError(text)
        positions[name] = LogPosition(at, count)
    return positions


def positions_of(found: JobLogs, before: dict[str, LogPosition] | None = None) -> dict[str, LogPosition]:
    """Each replica's position after this read (those of `before` for replicas it did not read)."""
    positions = dict(before or {})
    positions.update({replica.replica: replica.position for replica in found.replicas if replica.position is not None})
    return positions
