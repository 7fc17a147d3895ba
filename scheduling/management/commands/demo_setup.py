from django.core.management.base import BaseCommand

from scheduling.models import Workload
from scheduling.services import demo


class Command(BaseCommand):
    help = "Create the demo federation (users, teams, three orchestrators, 40 nodes) and fill its history."

    def add_arguments(self, parser):
        parser.add_argument("--history-days", type=float, default=3.0, help="days of history to replay (default 3)")

    def handle(self, *args, history_days: float, **options):
        demo.create_demo_federation()
        if Workload.objects.exists():
            self.stdout.write("Demo history already present; keeping it.")
        else:
            jobs = demo.fill_history(history_days)
            self.stdout.write(f"Replayed {jobs} Philly trace jobs over the last {history_days:g} days.")
        self.stdout.write("Demo users (username / password):")
        for username, password, team, role, staff in demo.DEMO_USERS:
            who = "portal admin" if staff else f"{role} in {team}"
            self.stdout.write(f"  {username} / {password}  ({who})")
