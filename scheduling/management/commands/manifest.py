"""`manage.py manifest`: print the cluster object the Kubernetes adapter would create for a job."""

import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from jobs.models import Job
from scheduling.selectors import manifest_of


class Command(BaseCommand):
    help = "Print the manifest (TFJob, PyTorchJob...) the Kubernetes adapter would create for a job (either backend)."

    def add_arguments(self, parser):
        parser.add_argument("job_id", type=int, help="The Gangway job id.")

    def handle(self, *args, job_id: int, **options):
        try:
            job = Job.objects.select_related("team", "tier").filter(pk=job_id).first()
        except DatabaseError as error:  # a fresh checkout: no database, or not migrated yet
            raise CommandError(f"Cannot read job {job_id}: {error}. Run `manage.py migrate`, or set "
                               "DATABASE_URL to Gangway's database.") from error  # fmt: skip
        if job is None:
            raise CommandError(f"No job with id {job_id}.")
        try:
            manifest = manifest_of(job)
        except ImproperlyConfigured as error:  # PUBLIC_URL set: the pods get a job token, signed with SECRET_KEY
            raise CommandError(f"{error} With PUBLIC_URL set, the manifest carries a job token signed with "
                               "SECRET_KEY; set both.") from error  # fmt: skip
        self.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
