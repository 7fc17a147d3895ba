"""What a person waits for: each page's load event in Debian's chromium, on the demo with DEBUG off.

    .venv/bin/python benchmarks/page_load.py [--loads 20] [--roles admin,lead,alice]

Sets up the embedded demo in var/bench/page-load/ (migrate + demo_setup, once), serves it with gunicorn
(2 workers, DEBUG off, whitenoise compressing static files), signs in as each role and opens every page
``--loads`` times after one warm-up. The load event counts plotly.js: static/js/charts.js inserts it before
the load event on pages with a chart, and the browser holds the load event for it.

Anchor: the same pages with the full plotly.js bundle of the plotly wheel (4.8 MB) served at the partial
bundle's address, so only the bundle differs. One JSON line per page and bundle: page, role, bundle,
load_p50_ms, load_p95_ms, charts_p95_ms (until every chart holds its SVG); a last line with the worst
p95 of each bundle and both bundles' sizes. Goal: every page's load p95 <= 300 ms. Figures only.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / "var" / "bench" / "page-load"
PAGES = ["/", "/teams/", "/fragmentation/", "/utilisation/", "/quota/", "/ledger/", "/rebalance/", "/reports/",
         "/forecast/", "/whatif/", "/workloads/mine/",
         "/audit/", "/workloads/finished/"]  # fmt: skip
PASSWORDS = {"admin": "admin", "lead": "lead", "alice": "alice", "bob": "bob"}
CHROMIUM = "/usr/bin/chromium"
PARTIAL = "/static/vendor/plotly/plotly-cartesian-"


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{STATE / 'demo.sqlite3'}",
        "GPUPORTAL_VAR_DIR": str(STATE),
        "DEBUG": "0",
        "SECRET_KEY": "page-load-benchmark-only",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
    }


def set_up(env: dict[str, str]) -> None:
    if (STATE / "demo.sqlite3").exists():
        return
    STATE.mkdir(parents=True, exist_ok=True)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True, capture_output=True)
    subprocess.run([*manage, "demo_setup", "--i-know-this-is-a-demo"], env=env, check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(env: dict[str, str], port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "gpuportal.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not start")


def full_bundle() -> bytes:
    import plotly

    return (Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js").read_bytes()


def timings(page) -> tuple[float, float]:
    """(load event, every chart drawn) in ms since navigation start."""
    page.wait_for_function(
        "[...document.querySelectorAll('.plot[data-figure]')].every(p => p.querySelector('svg'))", timeout=30_000
    )
    return page.evaluate(
        "() => [performance.getEntriesByType('navigation')[0].loadEventEnd, performance.now()]"
    )  # fmt: skip


def measure(browser, base: str, role: str, bundle: str, loads: int) -> list[dict]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    if bundle == "full":
        body = full_bundle()
        page.route(f"**{PARTIAL}*", lambda route: route.fulfill(body=body, content_type="text/javascript"))
    page.goto(base + "/accounts/login/")
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(PASSWORDS[role])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base + "/")
    rows = []
    for path in PAGES:
        page.goto(base + path, wait_until="load")  # warm-up: the browser cache holds static files after it
        timings(page)
        loads_ms, charts_ms = [], []
        for _ in range(loads):
            page.goto(base + path, wait_until="load")
            load, charts = timings(page)
            loads_ms.append(load)
            charts_ms.append(charts)
        rows.append(
            {
                "page": path, "role": role, "bundle": bundle,
                "load_p50_ms": round(statistics.median(loads_ms), 1),
                "load_p95_ms": round(percentile(loads_ms, 95), 1),
                "charts_p95_ms": round(percentile(charts_ms, 95), 1),
            }
        )  # fmt: skip
    context.close()
    return rows


def percentile(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--roles", default="admin,lead,alice")
    args = parser.parse_args()
    env = environment()
    set_up(env)
    port = free_port()
    server = serve(env, port)
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    worst: dict[str, float] = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            for bundle in ("partial", "full"):
                for role in args.roles.split(","):
                    for row in measure(browser, f"http://127.0.0.1:{port}", role, bundle, args.loads):
                        print(json.dumps(row), flush=True)
                        worst[bundle] = max(worst.get(bundle, 0.0), row["load_p95_ms"])
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    partial = next((ROOT / "static" / "vendor" / "plotly").glob("plotly-cartesian-*.min.js")).stat().st_size
    sizes = {"partial_bundle_bytes": partial, "full_bundle_bytes": len(full_bundle())}
    print(json.dumps({"summary": "worst page load p95 (ms)", **worst, **sizes, "goal_ms": 300}))


if __name__ == "__main__":
    main()
