from django.core.management.base import BaseCommand

from portal.settings_reference import markdown_table


class Command(BaseCommand):
    help = "Print the configuration table (every environment variable, its default and meaning) in Markdown."
    requires_system_checks = []

    def handle(self, *args, **options):
        self.stdout.write(markdown_table(), ending="")
