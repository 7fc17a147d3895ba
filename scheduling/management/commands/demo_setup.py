from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.models import Workload
from scheduling.services import demo, report_delivery

CONSENT_FLAG = "--i-know-this-is-a-demo"
DEFAULT_HISTORY_DAYS = 42.0  # the charts' 7-day and 4-week ranges and the weekly reports need weeks, not days


class Command(BaseCommand):
    help = (
        "Create the demo federation (users, teams, three orchestrators, 40 nodes) and fill its history. "
        f"Its users sign in with their names as passwords (admin/admin): it runs only with {CONSENT_FLAG} "
        "or GPUPORTAL_DEMO=1."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--history-days",
            type=float,
            default=DEFAULT_HISTORY_DAYS,
            help=f"days of history to replay (default {DEFAULT_HISTORY_DAYS:g}: the pages' longest default range, "
            "8 weeks of forecast, reads what there is; six weeks give five finished weekly reports)",
        )
        parser.add_argument(
            CONSENT_FLAG,
            action="store_true",
            dest="demo_consent",
            help="this database is a throwaway demo: create the admin/admin superuser and friends in it",
        )

    def handle(self, *args, history_days: float, demo_consent: bool, **options):
        # DEBUG says nothing about the database: a production database must never get admin/admin.
        if not (demo_consent or settings.GPUPORTAL_DEMO):
            raise CommandError(
                "demo_setup creates the superuser admin/admin and three more users whose passwords are their "
                f"names. Run it only on a throwaway demo database, with {CONSENT_FLAG} or GPUPORTAL_DEMO=1 "
                "(make demo passes it)."
            )
        demo.create_demo_federation()
        if demo.seed_quota_requests():
            self.stdout.write("Filed two quota requests: alice's awaits a decision, bob's is granted and ends soon.")
        if Workload.objects.exists():
            self.stdout.write("Demo history already present; keeping it.")
        else:
            jobs = demo.fill_history(history_days)
            self.stdout.write(f"Replayed {jobs} Philly trace jobs over the last {history_days:g} days.")
            reports = report_delivery.build_finished_weeks(since=timezone.now() - timedelta(days=history_days))
            self.stdout.write(f"Built the capacity reports of the {len(reports)} finished weeks inside that history.")
        self.stdout.write("Demo users (username / password):")
        for username, password, team, role, staff in demo.DEMO_USERS:
            who = "portal admin" if staff else f"{role} in {team}"
            self.stdout.write(f"  {username} / {password}  ({who})")
