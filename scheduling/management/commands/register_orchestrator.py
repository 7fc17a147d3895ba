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
        parser.add_argument("--slurm-conf", help="slurm.conf of the fleet (passed as SLURM_CONF to sacctmgr, scontrol)")
        parser.add_argument(
            "--node-domain",
            help="hardware domain of the cluster's nodes (docs/orchestrators.md): a separate site whose node names "
            "repeat elsewhere; '' puts it back in the shared pool",
        )
        parser.add_argument(
            "--scrape-time-limit", type=int, help="seconds one scrape of this cluster may take (default: settings)"
        )
        governance = parser.add_argument_group("governance (docs/governance.md; merged into options.governance)")
        governance.add_argument(
            "--governance-mode",
            choices=("auto", "review"),
            help="auto: each round applies its changes; review (the default): a plan an admin approves",
        )
        governance.add_argument("--slurm-cluster", help="the Slurm cluster name in slurmdbd (default: --name)")
        governance.add_argument("--sacctmgr", help="the fleet's own sacctmgr (a path, or a wrapper such as a chroot's)")
        governance.add_argument("--root-account", help="the Slurm account the team tree hangs under (default root)")
        governance.add_argument("--gpu-model", help="the GPU model of this orchestrator's queues (default: any)")

    def handle(self, *args, kind, name, url, token_file, token_env, kubeconfig, user, api_version, **options):
        if token_file and token_env:
            raise CommandError("--token-file and --token-env: give one or the other")
        credentials = f"file:{token_file}" if token_file else f"env:{token_env}" if token_env else ""
        given = {"kubeconfig": kubeconfig, "user": user, "api_version": api_version}
        given["scrape_time_limit_s"] = options["scrape_time_limit"]
        extra = {k: v for k, v in {**given, "slurm_conf": options["slurm_conf"]}.items() if v}
        governance = _governance(kind, options)
        try:
            orchestrator, created = register_orchestrator(
                kind=kind, name=name, url=url, credentials_ref=credentials, options=extra, governance=governance,
                node_domain=options["node_domain"],
            )
        except ValidationError as error:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in error.message_dict.items())) from error
        self.stdout.write(f"{'Registered' if created else 'Updated'} {orchestrator}.")


SLURM_ONLY = ("slurm_cluster", "sacctmgr", "root_account")


def _governance(kind: str, options: dict) -> dict:
    """The governance options given, under the names ``options.governance`` uses; a Slurm-only one on another
    kind is refused by name rather than stored where nothing reads it."""
    wrong = [f"--{key.replace('_', '-')}" for key in SLURM_ONLY if options.get(key) and kind != "slurm"]
    if wrong:
        raise CommandError(f"{', '.join(wrong)}: only for --kind slurm (this is {kind})")
    names = {
        "governance_mode": "mode",
        "slurm_cluster": "cluster",
        "sacctmgr": "sacctmgr",
        "root_account": "root_account",
        "gpu_model": "gpu_model",
    }
    return {field: options[arg] for arg, field in names.items() if options.get(arg)}
