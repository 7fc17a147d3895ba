from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from scheduling.models import Orchestrator
from scheduling.services.collection import register_orchestrator


class Command(BaseCommand):
    help = "Register or update one orchestrator endpoint (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--kind", required=True, choices=Orchestrator.Kind.values)
        parser.add_argument("--name", required=True)
        parser.add_argument("--url", required=True, help="slurmrestd / Ray dashboard / Kubernetes API URL")
        parser.add_argument("--token-file", help="file holding the Slurm JWT (stored as a file: reference)")
        parser.add_argument("--token-env", help="environment variable holding the token (env: reference)")
        parser.add_argument("--kubeconfig", help="kubeconfig path for Kubernetes")
        parser.add_argument("--user", help="Slurm user name sent with the JWT")
        parser.add_argument("--api-version", help="slurmrestd API version, e.g. v0.0.38")

    def handle(self, *args, kind, name, url, token_file, token_env, kubeconfig, user, api_version, **options):
        if token_file and token_env:
            raise CommandError("--token-file and --token-env: give one or the other")
        credentials = f"file:{token_file}" if token_file else f"env:{token_env}" if token_env else ""
        extra = {k: v for k, v in {"kubeconfig": kubeconfig, "user": user, "api_version": api_version}.items() if v}
        try:
            orchestrator, created = register_orchestrator(
                kind=kind, name=name, url=url, credentials_ref=credentials, options=extra
            )
        except ValidationError as error:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())) from error
        self.stdout.write(f"{'Registered' if created else 'Updated'} {orchestrator}.")
