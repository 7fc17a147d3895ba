"""The shared cast: a researcher and a lead of research/nlp, an admin, and an outsider in production."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from scheduling.models import Membership, Node, Orchestrator, Queue, Team
from tests.browser import browser, session  # noqa: F401 - one headless browser for tests/e2e and tests/security
from tests.live_clusters import cluster, ray_cluster, ray_workload, slurm_fleet, slurm_jobs  # noqa: F401 - once


@pytest.fixture
def orchestrator(db):
    return Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="https://slurm.example:6820")


@pytest.fixture
def fleet(orchestrator):
    """Eight 8-GPU H100 nodes (64 GPUs) on two leaf switches."""
    return [
        Node.objects.create(
            orchestrator=orchestrator,
            name=f"dgx{i:02d}",
            gpu_model="H100",
            gpu_total=8,
            nvlink_domain=f"nvl{i:02d}",
            leaf_switch=f"leaf{i // 4}",
            spine="spine0",
        )
        for i in range(8)
    ]


@pytest.fixture
def demo_like_fleet(orchestrator, teams):
    """The demo's 128 A100 + 192 H100 GPUs with 287 of them guaranteed, any model, to the top-level teams."""
    for i in range(40):
        model = "A100" if i < 16 else "H100"
        Node.objects.create(orchestrator=orchestrator, name=f"gpu{i:03d}", gpu_model=model, gpu_total=8)
    for team, weight, guaranteed in (("research", 40, 127), ("production", 60, 160)):
        Queue.objects.create(team=teams[team], weight=Decimal(weight), guaranteed=guaranteed, burst_limit=320)
    Queue.objects.create(team=teams["nlp"], weight=Decimal(100), guaranteed=64, burst_limit=320)  # inside research's
    return {"A100": 128, "H100": 192}


@pytest.fixture
def teams(db):
    research = Team.objects.create(slug="research", name="Research")
    production = Team.objects.create(slug="production", name="Production")
    nlp = Team.objects.create(slug="nlp", name="NLP", parent=research)
    return {"research": research, "production": production, "nlp": nlp}


@pytest.fixture
def queues(teams, fleet):
    make = lambda team, weight, guaranteed, burst: Queue.objects.create(  # noqa: E731
        team=teams[team], weight=Decimal(weight), guaranteed=guaranteed, burst_limit=burst
    )
    return {
        "research": make("research", 40, 16, 48),
        "production": make("production", 60, 24, 64),
        "nlp": make("nlp", 100, 8, 32),
    }


@pytest.fixture
def cast(teams, django_user_model):
    users = {
        "researcher": django_user_model.objects.create_user("rita", password="pw"),
        "lead": django_user_model.objects.create_user("leo", password="pw"),
        "admin": django_user_model.objects.create_user("ada", password="pw", is_staff=True, is_superuser=True),
        "outsider": django_user_model.objects.create_user("otto", password="pw"),
        "nlp_lead": django_user_model.objects.create_user("nina", password="pw"),
    }
    Membership.objects.create(user=users["researcher"], team=teams["nlp"], role=Membership.Role.RESEARCHER)
    Membership.objects.create(user=users["lead"], team=teams["research"], role=Membership.Role.LEAD)
    Membership.objects.create(user=users["nlp_lead"], team=teams["nlp"], role=Membership.Role.LEAD)
    Membership.objects.create(user=users["outsider"], team=teams["production"], role=Membership.Role.RESEARCHER)
    return users


@pytest.fixture
def period():
    start = timezone.now() + timedelta(days=1)
    return start, start + timedelta(days=7)


ADMISSION_TOKEN = "test-admission-token"


@pytest.fixture
def admission_process(settings):
    """The admission webhook as its own process serves it (gpuportal.settings_admission's URLs: the webhook is not
    on the portal's web port) with its bearer token set; ``tests.api.test_admission.post`` presents it."""
    settings.ROOT_URLCONF = "gpuportal.urls_admission"
    settings.GPUPORTAL_ADMISSION_TOKEN = ADMISSION_TOKEN
    return ADMISSION_TOKEN


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Cached derived figures (forecasts, throttle counters, the admission webhook's directory) never leak from one
    test into the next. The directory's stamp cannot tell tests apart: a flush between transactional tests empties
    the table-change log, so the next test's writes can sum to the same generations over different rows."""
    from django.core.cache import cache

    from scheduling.services import admission_directory

    cache.clear()
    admission_directory.forget()
    yield


@pytest.fixture(autouse=True, scope="session")
def _client_login_passes_a_request():
    """django-axes refuses ``authenticate()`` without a request (it could not count the attempt), and
    Django's test client calls it without one: give ``Client.login`` a request, as axes' docs advise, so a
    test may still sign in with a password (``force_login`` needs nothing)."""
    from django.test import RequestFactory
    from django.test.client import ClientMixin

    original = ClientMixin.login

    def login(self, **credentials):
        credentials.setdefault("request", RequestFactory().post("/accounts/login/"))
        return original(self, **credentials)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClientMixin, "login", login)
        yield
