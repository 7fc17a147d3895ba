from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.services.fragmentation import backfill_fragmentation


class Command(BaseCommand):
    help = (
        "Store fragmentation samples replayed from workload placements for history no round sampled "
        "(e.g. after upgrading), so the fragmentation trend reads stored rows. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=float, default=7, help="how far back (default 7, the longest trend)")
        parser.add_argument("--step-minutes", type=float, default=5, help="minutes between samples (default 5)")

    def handle(self, *args, days: float, step_minutes: float, **options):
        if days <= 0:
            raise CommandError("--days must be greater than 0")
        if step_minutes <= 0:
            raise CommandError("--step-minutes must be greater than 0")
        until = timezone.now()
        written = backfill_fragmentation(until - timedelta(days=days), until, timedelta(minutes=step_minutes))
        self.stdout.write(f"Stored {written} replayed fragmentation samples over the last {days:g} days.")
