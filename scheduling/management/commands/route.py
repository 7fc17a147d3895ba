import sys
from dataclasses import replace
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scheduling.engine.submissions import describe_file
from scheduling.selectors.routing import route_workload

MAX_BYTES = 1_000_000


class Command(BaseCommand):
    help = (
        "Where should this workload go, and why: reads a pod / Job / Volcano Job YAML or an sbatch script "
        "and answers with the orchestrator predicted to start it first and every candidate's wait."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="a Kubernetes manifest (YAML) or an sbatch script; - for stdin")
        parser.add_argument("--team", default="", help="the team, when the file does not name one")

    def handle(self, *args, file: str, team: str, **options):
        text = self._read(file)
        try:
            description = describe_file(text, name=file)
        except ValueError as error:
            raise CommandError(f"{file}: {error}") from error
        if team:
            description = replace(description, team=team)
        if description.gpus_per_member < 1:
            raise CommandError(f"{file}: requests no GPUs: nothing to route")
        answer = route_workload(description)
        shape = f"{description.members} × {description.gpus_per_member} GPU"
        self.stdout.write(f"{description.source}: {shape}, team {description.team or '(none)'}")
        self.stdout.write(f"-> {answer.orchestrator or 'nowhere'} ({answer.pool or 'no pool'}), rule {answer.rule}")
        for reason in answer.reasons:
            self.stdout.write(f"   {reason}")

    def _read(self, file: str) -> str:
        if file == "-":
            return sys.stdin.read(MAX_BYTES)
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file")
        if path.stat().st_size > MAX_BYTES:
            raise CommandError(f"{file}: larger than {MAX_BYTES} bytes")
        return path.read_text(encoding="utf-8", errors="replace")
