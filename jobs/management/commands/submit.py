import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from jobs.services import IdempotencyConflict, NeverFits, QueueFull, job_submit
from jobs.spec import SpecError, parse_spec
from jobs.yaml_import import spec_from_yaml
from tenants.models import Team


class Command(BaseCommand):
    help = "Submit a job from a YAML file (Gangway's spec or a manifest of one of its job kinds) through the submission service."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="Team slug.")
        parser.add_argument("--file", required=True, help="Path to the YAML file, or - for standard input.")
        parser.add_argument("--user", help="Username to record as the owner.")
        parser.add_argument("--idempotency-key", default="", help="Resubmitting with the same key returns the same job.")

    def handle(self, *args, team: str, file: str, user: str | None, idempotency_key: str, **options):
        team_row = Team.objects.filter(slug=team).first()
        if team_row is None:
            raise CommandError(f"No team {team!r}.")
        owner = None
        if user:
            owner = get_user_model().objects.filter(username=user).first()
            if owner is None:
                raise CommandError(f"No user {user!r}.")
        try:
            text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        except UnicodeDecodeError:
            raise CommandError(f"{file} is not UTF-8 text; a job's YAML must be.") from None
        try:
            data, unsupported = spec_from_yaml(text)
            if isinstance(data, dict) and "team" not in data:
                data = {**data, "team": team}
            spec = parse_spec(data, team=team)
            job, created = job_submit(team=team_row, spec=spec, owner=owner, via="manage.py submit",
                                      idempotency_key=idempotency_key)  # fmt: skip
        except SpecError as error:
            raise CommandError("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.errors.items())) from None
        except NeverFits as error:
            raise CommandError(f"Can never run: {error.reason}") from None  # the API's and the form's words
        except (IdempotencyConflict, QueueFull) as error:
            raise CommandError(str(error)) from None
        for field in unsupported:
            self.stderr.write(f"Not carried over: {field}")
        verb = "Submitted" if created else "Already submitted"
        self.stdout.write(f"{verb} job {job.name} (#{job.pk}) to team {team}: {job.state}.")
        if options["verbosity"] > 1:
            self.stdout.write(json.dumps({"id": job.pk, "state": job.state}))
