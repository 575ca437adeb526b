"""How far one try at sending a message got: what a try cut short in the middle is recorded as.

The worker's soft time limit (CELERY_TASK_SOFT_TIME_LIMIT) can stop a send anywhere: while connecting,
while the message is going out, or while its receiver's answer is awaited. A try that sent nothing of
its message is tried again; one whose message had begun to go out may have reached its receiver, and is
recorded as sent, its answer unknown, so that nobody gets it twice (`outcomes.cut_short`). A send its own
deadline cuts short (WEBHOOK_DEADLINE, EMAIL_DEADLINE: `deadlines.py`) is recorded the same way. The mail
connection (`mail.py`) and the webhook's (`outbound.py`) mark the try as the message leaves.
"""

from __future__ import annotations


class Attempt:
    """One try at sending one message. `began`: the message itself (an HTTP request, an e-mail's content
    after DATA) was being handed to the network, so its receiver may have it; set just before its first
    byte goes, never unset. `taken`: the receiver said it has it (a 2xx, a mail server's 250)."""

    def __init__(self) -> None:
        self.began = False
        self.taken = False

    def begin(self) -> None:
        self.began = True

    def take(self) -> None:
        self.began = self.taken = True
