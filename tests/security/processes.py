"""Private PostgreSQL, Redis and Celery worker processes for fault tests, on free loopback ports.

Each helper starts its own process (never the shared 5432/6379 services), waits until it answers, and
returns a handle whose ``stop()`` ends it; fixtures call ``stop()`` in their finalizers, so a failing
test leaves nothing running. PostgreSQL refuses to run as root: when the tests run as root, initdb and
the server run as the ``postgres`` user (runuser), in a temporary folder that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {WAIT_S:g} s")


def _end(process: subprocess.Popen) -> None:
    """SIGCONT first (a SIGSTOPped process ignores SIGTERM until continued), then TERM, then KILL."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGCONT)
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


# --- Redis -----------------------------------------------------------------------------------------


def redis_binary() -> str | None:
    return shutil.which("redis-server")


@dataclass
class Redis:
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, nothing answers (a hung broker)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        _end(self.process)


def start_redis() -> Redis:
    port = free_port()
    argv = [redis_binary() or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    process = subprocess.Popen([*argv, "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
    except RuntimeError:
        _end(process)
        raise
    return Redis(port, process)


# --- PostgreSQL ------------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass
class Postgres:
    port: int
    folder: Path
    bin: Path
    log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/gpuportal"

    def _ctl(self, *args: str) -> None:
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-w", "-t", "30", *args]
        subprocess.run(_as_server_user(argv), check=True, stdout=subprocess.DEVNULL)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-o", options, "-l", str(self.folder / "server.log"), "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends every session at once, as a restart or crash of the server does to its clients."""
        self._ctl("-m", mode, "stop")

    def _pids(self) -> list[int]:
        """The postmaster (from its pid file) and its children: this cluster's processes only."""
        postmaster = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        children = []
        for status in glob.glob("/proc/[0-9]*/status"):
            with contextlib.suppress(OSError):
                fields = dict(line.split(":\t", 1) for line in Path(status).read_text().splitlines() if ":\t" in line)
                if int(fields.get("PPid", "0").strip()) == postmaster:
                    children.append(int(status.split("/")[2]))
        return [postmaster, *children]

    def pause(self) -> None:
        """SIGSTOP every process of this cluster: connections are accepted by the kernel, nothing answers."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> Postgres:
    binaries = postgres_bin()
    assert binaries is not None, "no /usr/lib/postgresql/*/bin"
    folder = Path(tempfile.mkdtemp(prefix="gpuportal-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    server = Postgres(free_port(), folder, binaries)
    initdb = [str(binaries / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres", "--no-sync"]
    subprocess.run(_as_server_user([*initdb, "-E", "UTF8"]), check=True, stdout=subprocess.DEVNULL)
    server.start()
    psql = [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "gpuportal"]
    subprocess.run(psql, check=True)
    return server


def migrate(database_url: str) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test", "DATABASE_URL": database_url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)


# --- Celery worker ---------------------------------------------------------------------------------


@dataclass
class Worker:
    process: subprocess.Popen

    def kill(self) -> None:
        """SIGKILL: no warm shutdown, no acknowledgement: the broker still holds its message as unacked."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        _end(self.process)


def start_worker(
    *, database_url: str, broker_url: str, gate: Path | None = None, concurrency: int = 0, **env: str
) -> Worker:
    """A real ``celery worker`` (solo pool; with ``concurrency``, that many prefork processes) on the private
    broker and database; with ``gate``, its what-if simulator stops at the first progress report until
    ``gate/release`` exists (tests/security/fault_worker.py)."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_RESULT_BACKEND": broker_url,
        **env,
    }
    if gate is not None:
        environment["FAULT_GATE_DIR"] = str(gate)
    pool = ["--pool=prefork", f"--concurrency={concurrency}"] if concurrency else ["--pool=solo"]
    argv = [sys.executable, str(Path(__file__).with_name("fault_worker.py")), "worker", *pool]
    flags = ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return Worker(subprocess.Popen([*argv, *flags], cwd=ROOT, env=environment))


def wait_for(predicate, what: str, timeout: float = 90.0, every: float = 0.1):
    """Poll until ``predicate()`` is truthy (bounded; never a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")
