import time

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from portal.upgrades import missing_migrations


class Command(BaseCommand):
    help = ("Wait until the database has every migration this code needs, then exit 0 (exit 1 after --timeout). "
            "Workers, the notifier and beat run it before they start, so an upgrade's new processes wait for "
            "its migrate Job instead of failing on the older schema.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most (default 600)")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between looks (default 5)")

    def handle(self, *args, timeout: float, interval: float, **options):
        deadline = time.monotonic() + timeout
        said = ""
        while True:
            try:
                missing = missing_migrations()
            except DatabaseError as error:
                status = f"The database cannot be read yet: {str(error).strip()}"
            else:
                if not missing:
                    self.stdout.write("The database has every migration this code needs.")
                    return
                status = (f"Waiting for {len(missing)} migration(s) to be applied (the first: {missing[0]}); "
                          "the migrate Job applies them.")  # fmt: skip
            if status != said:  # once per change, not every few seconds
                self.stdout.write(status)
                said = status
            if time.monotonic() + interval > deadline:
                raise CommandError(f"Gave up after {timeout:g} s. {status}")
            time.sleep(interval)
