"""Build (and optionally send) the weekly capacity report of a given week, as beat does on Mondays.

python manage.py capacity_report                   # last full week, built once, not sent
python manage.py capacity_report --week-of 2026-11-16 --send
python manage.py capacity_report --week-of 2026-11-16 --rebuild   # recompute a stored report
"""

from datetime import datetime, time, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.reports.capacity import week_before
from scheduling.services import report_delivery


class Command(BaseCommand):
    help = "Build the weekly capacity report of a week (default: the last full week) and optionally email it."

    def add_arguments(self, parser):
        parser.add_argument("--week-of", help="any date (YYYY-MM-DD) inside the week, in TIME_ZONE")
        parser.add_argument("--send", action="store_true", help="email it to subscribers (once: skipped if sent)")
        parser.add_argument("--rebuild", action="store_true", help="recompute a stored report's content")

    def handle(self, *args, **opts):
        now = timezone.now()
        if opts["week_of"]:
            try:
                day = datetime.strptime(opts["week_of"], "%Y-%m-%d").date()
            except ValueError as error:
                raise CommandError(f"--week-of: expected YYYY-MM-DD, got {opts['week_of']!r}") from error
            now = timezone.make_aware(datetime.combine(day + timedelta(days=7), time(12)))
        window = week_before(now)
        report = report_delivery.generate_report(window)
        if opts["rebuild"]:
            report = report_delivery.rebuild_report(report)
        sent = report_delivery.send_report(report.pk) if opts["send"] else 0
        self.stdout.write(f"Report #{report.pk} for {window.start:%Y-%m-%d} ({report.status}); emails sent: {sent}")
