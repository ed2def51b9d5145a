from django.core.management.base import BaseCommand

from op_site import ops


class Command(BaseCommand):
    help = "Runs one of op_site.ops (the fixture's admin operations) while the server is down."

    def add_arguments(self, parser):
        parser.add_argument("op", choices=sorted(ops.OPS))
        parser.add_argument("arguments", nargs="?", default="{}", help="keyword arguments, as JSON")

    def handle(self, *args, **options):
        self.stdout.write(ops.run_json(options["op"], options["arguments"]))
