"""Orchestrators, the nodes they own, the work they run, and what each scrape saw."""

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from scheduling.orchestrator_options import mapping_problems, options_problems
from scheduling.validators import check_credentials_ref, check_endpoint

from .teams import Team

DEMO_PREFIX = "demo://"  # endpoints served by the embedded demo federation, not by a real cluster


def all_options_problems(kind: str, options: object) -> list[str]:
    """The options' shape for ``kind`` (the JSON schema), then what only the database can tell: a governance
    mapping naming a team that does not exist (the admin, the API and ``register_orchestrator`` all ask)."""
    problems = options_problems(kind, options)
    if problems or kind != Orchestrator.Kind.KUBERNETES:
        return problems
    return mapping_problems(options, set(Team.objects.values_list("slug", flat=True)))


KEY_SEPARATOR = "@"  # never in a Slurm host name, a Kubernetes node name or a domain (a slug)


def node_key(domain: str, name: str) -> str:
    """``name`` in the shared domain, else ``name@domain``: unique across domains, and today's names unchanged."""
    return f"{name}{KEY_SEPARATOR}{domain}" if domain else name


def split_node_key(key: str) -> tuple[str, str]:
    """(domain, name) of a ``node_key``."""
    name, _, domain = key.rpartition(KEY_SEPARATOR)
    return (domain, name) if name else ("", key)


class OrchestratorQuerySet(models.QuerySet):
    def real(self) -> "OrchestratorQuerySet":
        """Enabled orchestrators a real cluster answers for (not the demo's)."""
        return self.filter(enabled=True).exclude(endpoint__startswith=DEMO_PREFIX)

    def governed(self) -> "OrchestratorQuerySet":
        """The real Slurm, Kubernetes and Ray orchestrators: those governance enforces on."""
        return self.real().filter(kind__in=Orchestrator.SCHEDULER_KINDS)


class Orchestrator(models.Model):
    """One endpoint of kind slurm | kubernetes | ray, with the pool of nodes it owns.

    ``credentials_ref`` names where the secret lives (``env:GPUPORTAL_SECRET_NAME`` or a file inside the
    credentials directories, see scheduling/validators.py); the secret itself is never stored in the
    database nor shown by the API. ``demo://`` endpoints are served by the embedded demo federation.
    """

    class Kind(models.TextChoices):
        SLURM = "slurm", "Slurm"
        KUBERNETES = "kubernetes", "Kubernetes"
        RAY = "ray", "Ray"
        PROMETHEUS = "prometheus", "Prometheus (DCGM metrics)"

    SCHEDULER_KINDS = (Kind.SLURM, Kind.KUBERNETES, Kind.RAY)

    name = models.SlugField(unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    endpoint = models.CharField(max_length=300)
    credentials_ref = models.CharField(max_length=300, blank=True)
    enabled = models.BooleanField(default=True)
    # Node names are unique within a hardware domain (issue 35): the nodes of orchestrators of one domain are one
    # shared pool the rebalancer moves between them (a hostname seen under another orchestrator of the domain is a
    # move); another domain's "dgx01" is another machine. "" is the shared domain every orchestrator starts in.
    node_domain = models.SlugField(
        max_length=50,
        blank=True,
        default="",
        help_text="Hardware domain of this cluster's nodes: leave empty when its machines may move to or from other "
        "orchestrators (one shared pool); name a separate site or cluster whose node names repeat elsewhere.",
    )
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Source settings, e.g. {"api_version": "v0.0.38", "user": "slurm", "team_field": "account"}',
    )
    breaker_state = models.JSONField(default=dict, blank=True, editable=False)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The scrape holding the lease; only it may release it (services/collection.py).
    lease_token = models.CharField(max_length=32, blank=True, default="", editable=False)
    # Until when a `manage.py watch_kubernetes` process collects this source from its watch cache: the Celery
    # round leaves it alone until then, and re-lists it again once the watcher has stopped renewing this.
    watched_until = models.DateTimeField(null=True, blank=True, editable=False)
    objects = OrchestratorQuerySet.as_manager()
    history = HistoricalRecords(
        excluded_fields=[
            "last_success_at", "last_error", "last_error_at", "breaker_state", "lease_until", "lease_token",
            "watched_until",
        ]
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def clean(self) -> None:
        """Where the worker may read the secret and where it may send it, and options of the shape their kind
        reads (the admin, services and ``register_orchestrator`` through ``full_clean``)."""
        errors = {}
        for field, check in (("credentials_ref", check_credentials_ref), ("endpoint", check_endpoint)):
            try:
                check(getattr(self, field))
            except ValidationError as error:
                errors[field] = error.messages
        problems = all_options_problems(self.kind, self.options)
        if problems:
            errors["options"] = problems
        if errors:
            raise ValidationError(errors)

    @property
    def is_demo(self) -> bool:
        """Served by the embedded demo federation: no cluster to send anything to."""
        return self.endpoint.startswith(DEMO_PREFIX)

    @property
    def is_stale(self) -> bool:
        """Stale when the latest attempt failed after the latest success (or nothing succeeded yet)."""
        if self.last_success_at is None:
            return True
        return self.last_error_at is not None and self.last_error_at > self.last_success_at


class NodeQuerySet(models.QuerySet):
    def schedulable(self):
        """Nodes that take new work: not draining, drained or down (``Node.UNSCHEDULABLE``)."""
        return self.exclude(state__in=Node.UNSCHEDULABLE)

    def serving(self):
        """Nodes that are not down: the GPUs capacity and promises count (a drained node comes back)."""
        return self.exclude(state=Node.State.DOWN)


class Node(models.Model):
    """A GPU host as its current owner reports it, with its place in the network topology."""

    class State(models.TextChoices):
        IDLE = "idle", "Idle"
        MIXED = "mixed", "Mixed"
        ALLOCATED = "allocated", "Allocated"
        DRAINING = "draining", "Draining"
        DRAINED = "drained", "Drained"
        DOWN = "down", "Down"

    # The one set of states in which a node takes no new work (the engine's ``schedulable=False``).
    UNSCHEDULABLE = frozenset({State.DRAINING, State.DRAINED, State.DOWN})

    orchestrator = models.ForeignKey(Orchestrator, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(max_length=120)
    # The owner's ``node_domain`` when the node was first seen: (domain, name) is the machine (see Orchestrator).
    domain = models.SlugField(max_length=50, blank=True, default="", editable=False)
    gpu_model = models.CharField(max_length=40)
    gpu_total = models.PositiveIntegerField()
    gpu_allocated = models.PositiveIntegerField(default=0)
    cpu_total = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    nvlink_domain = models.CharField(max_length=120, blank=True)
    leaf_switch = models.CharField(max_length=120, blank=True)
    spine = models.CharField(max_length=120, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.IDLE)
    pinned = models.BooleanField(default=False, help_text="A pinned node is never moved by the rebalancer.")
    labels = models.JSONField(default=dict, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # Ownership and pinning are pool changes worth auditing; per-scrape counters are not.
    history = HistoricalRecords(excluded_fields=["gpu_allocated", "state", "labels", "last_seen_at"])

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["orchestrator__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["domain", "name"], name="one_owner_per_node"),
            models.CheckConstraint(
                condition=models.Q(gpu_allocated__lte=models.F("gpu_total")), name="allocated_within_total"
            ),
        ]
        indexes = [models.Index(fields=["gpu_model"])]

    def __str__(self) -> str:
        return self.key

    @property
    def key(self) -> str:
        """The node's name, qualified with its domain outside the shared one: what pages link and engines key by."""
        return node_key(self.domain, self.name)

    @property
    def gpu_free(self) -> int:
        return self.gpu_total - self.gpu_allocated


class Workload(models.Model):
    """Observed (or demo-simulated) unit of demand: a gang of members × GPUs per member."""

    class Kind(models.TextChoices):
        TRAINING = "training", "Training"
        HPO = "hpo", "Hyper-parameter search"
        INFERENCE = "inference", "Inference"
        BATCH = "batch", "Batch"

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        PREEMPTED = "preempted", "Preempted"

    ACTIVE_STATES = (State.PENDING, State.RUNNING)

    orchestrator = models.ForeignKey(Orchestrator, on_delete=models.CASCADE, related_name="workloads")
    external_id = models.CharField(max_length=200)
    team = models.ForeignKey(
        "scheduling.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads"
    )
    # The portal user the submitter maps to ("" when nobody: engine/owners.py), and the name the orchestrator
    # gave the submitter (a Slurm user, a label, namespace/service account, a Ray submitter) as collected.
    user = models.CharField(max_length=150, blank=True)
    cluster_user = models.CharField(max_length=255, blank=True)
    name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.BATCH)
    gang_size = models.PositiveIntegerField(default=1)
    gpus_per_member = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    # 64-bit: Slurm's priorities are uint32 (priority/basic counts down from 4294901759).
    priority = models.BigIntegerField(default=0)
    submitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_estimate_s = models.PositiveIntegerField(default=0)
    pending_reason = models.CharField(max_length=300, blank=True)
    nodes = models.JSONField(default=list, blank=True)
    # The job the orchestrator stops this workload by, when that is not the workload itself: a Ray placement group,
    # task or actor names its job's submission id (the Jobs API's stop, reclaim's lever); "" where the workload is
    # its own job (Slurm, Kubernetes) or where nothing can stop it (a Ray driver started by hand).
    submission_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-submitted_at"]
        constraints = [
            models.UniqueConstraint(fields=["orchestrator", "external_id"], name="one_workload_per_external_id")
        ]
        indexes = [
            models.Index(fields=["state", "orchestrator"]),
            models.Index(fields=["team", "state"]),
            # Queue waits read work that started in a window: with the columns they need in the index,
            # a month of jobs is read from the index alone. The fragmentation replay reads by start too;
            # API lists and tables order by submission time.
            models.Index(
                fields=["started_at", "submitted_at", "gang_size", "gpus_per_member"], name="workload_started_waits"
            ),
            models.Index(fields=["submitted_at"], name="workload_submitted"),
            models.Index(fields=["user", "state"], name="workload_user_state"),  # "my workloads"
            models.Index(fields=["finished_at"], name="workload_finished"),  # the finished-jobs list, newest first
        ]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}:{self.external_id}"

    @property
    def gpus(self) -> int:
        return self.gang_size * self.gpus_per_member


class WorkloadUtilisation(models.Model):
    """What a workload's GPUs actually did (from DCGM metrics), next to what it was allocated.

    ``idle_allocated_gpu_s`` counts allocated GPU-seconds spent under the idle threshold for longer than
    the grace period: the figure teams act on.
    """

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="utilisation")
    allocated_gpu_s = models.FloatField(default=0)
    busy_gpu_s = models.FloatField(default=0)
    idle_allocated_gpu_s = models.FloatField(default=0)
    samples = models.PositiveIntegerField(default=0)
    last_sample_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-idle_allocated_gpu_s"])]

    def __str__(self) -> str:
        return f"{self.workload}: {self.efficiency:.0%} busy"

    @property
    def efficiency(self) -> float:
        return self.busy_gpu_s / self.allocated_gpu_s if self.allocated_gpu_s else 0.0


class CollectorRun(models.Model):
    """What one scrape of one orchestrator saw, how long it took, and its error if it failed."""

    orchestrator = models.ForeignKey(Orchestrator, on_delete=models.CASCADE, related_name="runs")
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    ok = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    nodes = models.PositiveIntegerField(default=0)
    gpus_total = models.PositiveIntegerField(default=0)
    gpus_allocated = models.PositiveIntegerField(default=0)
    workloads_running = models.PositiveIntegerField(default=0)
    workloads_pending = models.PositiveIntegerField(default=0)
    pending_gpus = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["orchestrator", "-started_at"])]

    def __str__(self) -> str:
        return f"{self.orchestrator.name} @ {self.started_at:%Y-%m-%d %H:%M:%S} ({'ok' if self.ok else 'error'})"
