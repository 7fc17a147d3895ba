"""The headless-browser fixtures, shared by tests/e2e and tests/security: Debian's chromium driven by
Playwright against pytest-django's live server. Registered once, in tests/conftest.py: a session-scoped
browser defined in two conftest files would start Playwright twice, which its sync API refuses."""

import os
import re
from pathlib import Path

import pytest

from tests.support import require

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="session")
def browser():
    require(CHROMIUM.exists(), f"needs Debian's chromium at {CHROMIUM} (scripts/ci/install-chromium.sh)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by fixtures here are
    # still plain synchronous calls, so Django's async-safety guard would be a false alarm.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield instance
        instance.close()


class Session:
    """One browser context (a person), recording console errors and failed requests."""

    def __init__(self, browser, base_url: str, width: int = 1280):
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.base_url = base_url
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def go(self, path: str):
        response = self.page.goto(self.base_url + path)
        assert response is not None and response.status == 200, f"{path}: {response and response.status}"
        return self.page

    def log_in(self, username: str, password: str) -> None:
        self.page.goto(self.base_url + "/accounts/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Log in").click()
        self.page.wait_for_url(self.base_url + "/")

    def my_workload_row(self, search: str, pk: int):
        """"My workloads" reached by the overview's link and searched for ``search``: the row of workload ``pk``."""
        page = self.go("/")
        page.get_by_role("link", name="My workloads", exact=True).click()
        page.get_by_label("Job ID").fill(search)
        page.get_by_role("button", name="Search").click()
        row = page.locator(f"#workload-{pk}")
        row.wait_for()
        return row

    def request_quota_from(self, row, team_slug: str) -> str:
        """Follow a row's "Request quota →" link to the quota form; the team the form has chosen (its id)."""
        link = row.get_by_role("link", name="Request quota →")
        assert link.get_attribute("href") == f"/quota/new/?team={team_slug}"
        link.click()
        self.page.wait_for_url(re.compile(rf".*/quota/new/\?team={team_slug}$"))
        return self.page.get_by_label("Team", exact=True).input_value()

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def session(browser, live_server):
    opened: list[Session] = []

    def open_session(width: int = 1280) -> Session:
        opened.append(Session(browser, live_server.url, width))
        return opened[-1]

    yield open_session
    for item in opened:
        item.close()


def shot(page, name: str) -> None:
    """A full-page screenshot into ``$GPUPORTAL_SHOTS`` when it is set (walking the pages), else nothing."""
    folder = os.environ.get("GPUPORTAL_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def sideways(page) -> int:
    """How many pixels the page scrolls sideways (0: it fits the viewport)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
