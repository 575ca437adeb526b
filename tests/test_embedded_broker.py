"""The demo's embedded broker hands every message whole, with writers and readers racing.

kombu's own file-system transport lets a reader take a message its writer is still
writing (an empty payload: the worker dies on a JSONDecodeError); `portal.broker`
writes aside and renames. Two processes put large messages while two take them.
"""

from __future__ import annotations

import multiprocessing
import queue as stdlib_queue

from kombu import Connection

PER_WRITER, WRITERS, READERS = 300, 2, 2
PAD = "x" * 100_000  # large messages widen the window a reader could slip into


def _options(folder: str) -> dict:
    return {"data_folder_in": f"{folder}/q", "data_folder_out": f"{folder}/q", "control_folder": f"{folder}/c",
            "processed_folder": f"{folder}/p", "store_processed": False}  # fmt: skip


def _connect(folder: str) -> Connection:
    return Connection("filesystem://", transport="portal.broker:Transport", transport_options=_options(folder))


def _write(folder: str, writer: int) -> None:
    with _connect(folder) as connection:
        queue = connection.SimpleQueue("race")
        for n in range(PER_WRITER):
            queue.put({"writer": writer, "n": n, "pad": PAD})


def _read(folder: str, taken, results) -> None:
    seen, error = [], ""
    with _connect(folder) as connection:
        queue = connection.SimpleQueue("race")
        while True:
            with taken.get_lock():
                if taken.value >= PER_WRITER * WRITERS:
                    break
            try:
                message = queue.get(timeout=0.05)
            except queue.Empty:
                continue
            except Exception as exc:  # what kombu's own transport raises: the test's failure
                error = f"{type(exc).__name__}: {exc}"
                break
            body = message.payload
            message.ack()
            seen.append((body["writer"], body["n"], body["pad"] == PAD))
            with taken.get_lock():
                taken.value += 1
    results.put((seen, error))


def test_racing_writers_and_readers_lose_no_message(tmp_path):
    for part in "qcp":
        (tmp_path / part).mkdir()
    context = multiprocessing.get_context("spawn")
    taken, results = context.Value("i", 0), context.Queue()
    readers = [context.Process(target=_read, args=(str(tmp_path), taken, results)) for _ in range(READERS)]
    writers = [context.Process(target=_write, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for process in readers + writers:
        process.start()
    outcomes = []
    for _ in readers:
        try:
            outcomes.append(results.get(timeout=300))
        except stdlib_queue.Empty:
            break
    for process in readers + writers:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
    assert [error for _, error in outcomes] == [""] * READERS
    seen = sorted(item for found, _ in outcomes for item in found)
    assert seen == [(w, n, True) for w in range(WRITERS) for n in range(PER_WRITER)]
