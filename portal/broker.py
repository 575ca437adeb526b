"""The demo's embedded broker: kombu's file-system transport, with messages written atomically.

kombu's own `_put` writes a message straight under its final name, holding a lock its
`_get` never takes, so a worker can move and read a message before its writer has
written it, and dies on the empty payload. Here a message is written under a name no
reader picks up (its queue part does not end in `.msg`) and renamed into place when
whole; a rename within a folder is atomic. Used only with `filesystem://` (settings.py).
"""

from __future__ import annotations

import os
import time
import uuid

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put `payload` onto `queue`: written aside, then renamed to the name readers look for."""
        name = f"{int(round(time.monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
