"""``make serve``: the graphs served by Aegra on the project's PostgreSQL, one or more instances.

``langgraph dev`` keeps runs and threads in one process's memory; Aegra keeps them in PostgreSQL beside our
checkpoints, so threads, runs, assistants and pending approvals survive a restart, and the CLI and the
server resume each other's threads. This launcher wires it to the project:

- the database: ``DATABASE_URL``, else the embedded PostgreSQL of the checkout;
- connection pools sized from the server's ``max_connections`` (``pools.py``);
- Redis: ``REDIS_URL``, else a ``redis-server`` of our own on a free loopback port. With it, runs go through
  a shared queue, any instance can stream any run, and a run whose instance died is re-run from its last
  checkpoint. Without it (no ``redis-server``), one instance only, and a crash leaves its runs ``running``;
- ``SERVE_INSTANCES`` uvicorn processes on consecutive ports from ``SERVE_PORT`` (2026), each restarted if it
  dies;
- the memory graph on the server's cron every ``MEMORY_EXTRACTION_INTERVAL`` (``memory_cron.py``), created
  as the deployment's service identity, whose key the instances get and no client holds;
- the folder watcher (``graphs/watch.py``: ``workspace-agent watch run``) as a job of its own, restarted if
  it dies, unless ``WATCH_INTERVAL=off``.

The model is whatever the graphs are configured for (``OPENAI_BASE_URL`` …, else the local model).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx
import psycopg

from ..checkpoints.db import POOL_SIZE_ENV
from ..checkpoints.embedded import database_url
from ..providers.paths import data_home
from .auth import SERVICE_KEY_ENV
from .memory_cron import ensure_memory_cron, scheduler_env, service_key
from .pools import RESERVED, WATCHER_POOL, PoolPlan, plan_pools

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _say(text: str) -> None:
    print(f"[serve] {text}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the launcher dies, even by kill -9, so nothing is orphaned."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _spawn(cmd: list[str], env: dict[str, str], log: IO | None, cwd: Path) -> subprocess.Popen:
    err = subprocess.STDOUT if log else None
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=err, preexec_fn=_die_with_parent)


def _max_connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SHOW max_connections").fetchone()[0])  # type: ignore[index]


def start_redis(log_dir: Path | None) -> tuple[str, subprocess.Popen]:
    """A private ``redis-server`` on a free loopback port: no persistence, the truth is in PostgreSQL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server")
    port, folder = _free_port(), data_home() / "redis"
    folder.mkdir(exist_ok=True)
    log = (log_dir / "redis.log").open("a") if log_dir else subprocess.DEVNULL
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = _spawn([*cmd, "--dir", str(folder)], dict(os.environ), log, folder)  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return f"redis://127.0.0.1:{port}/0", proc
        except OSError:
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"redis-server did not start on port {port}")


class Instance:
    """One uvicorn process serving ``aegra_api.main:app`` on its own port."""

    def __init__(self, index: int, host: str, port: int, env: dict[str, str], log_dir: Path | None) -> None:
        self.index, self.host, self.port, self.env, self.log_dir = index, host, port, env, log_dir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """Where clients reach this instance."""
        return f"http://{self.host}:{self.port}"

    def start(self, *, migrate: bool) -> None:
        """Start the process; only the first instance runs the database migrations."""
        log = (self.log_dir / f"instance-{self.index}.log").open("a") if self.log_dir else None
        env = {**self.env, "RUN_MIGRATIONS_ON_STARTUP": "true" if migrate else "false"}
        cmd = [sys.executable, "-m", "uvicorn", "aegra_api.main:app", "--host", self.host]
        cmd += ["--port", str(self.port), "--timeout-graceful-shutdown", str(int(STOP_TIMEOUT))]
        self.proc = _spawn(cmd, env, log, Path(env["AEGRA_CONFIG"]).parent)

    def wait_healthy(self) -> None:
        """Block until ``/health`` answers 200.

        Raises:
            RuntimeError: The process exited or did not become healthy in time.
        """
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise RuntimeError(f"instance {self.index} exited with {code}{self._last_error()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"instance {self.index} not healthy after {START_TIMEOUT:.0f} s")

    def _last_error(self) -> str:
        """The last line the instance logged, so a failed start says why (a busy port, say)."""
        if self.log_dir is None:
            return ""  # its output went to the launcher's own, just above
        log = self.log_dir / f"instance-{self.index}.log"
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return ": " + ANSI.sub("", lines[-1]) if lines else ""

    def stop(self) -> None:
        """SIGTERM (Aegra drains its jobs), then SIGKILL after the grace period."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT + 5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def instance_env(
    db_url: str, plan: PoolPlan, redis_url: str | None, config: Path, interval: str | None, service: str
) -> dict[str, str]:
    """The environment of every instance: the project's settings plus Aegra's, and the service key."""
    env = {
        **os.environ,
        SERVICE_KEY_ENV: service,
        "DATABASE_URL": db_url,
        "AEGRA_CONFIG": str(config),
        "WORKSPACE_AGENT_HOME": str(data_home()),
        "LANGSMITH_TRACING": os.environ.get("LANGSMITH_TRACING", "false"),
        **plan.env(),
        **scheduler_env(interval),
    }
    if redis_url:
        env |= {"REDIS_BROKER_ENABLED": "true", "REDIS_URL": redis_url}
    return env


def start_watcher(env: dict[str, str], log_dir: Path | None) -> subprocess.Popen | None:
    """The folder watcher beside the instances, in their environment; ``None`` when switched off."""
    if not watching():
        return None
    log = (log_dir / "watch.log").open("a") if log_dir else None
    own = {**env, POOL_SIZE_ENV: str(WATCHER_POOL)}  # budgeted in the plan (watching())
    return _spawn([sys.executable, "-m", "workspace_agent.cli.main", "watch", "run"], own, log, ROOT)


def watching() -> bool:
    """Whether the launcher runs the folder watcher: unless ``WATCH_INTERVAL=off``."""
    return os.environ.get("WATCH_INTERVAL", "").strip().lower() != "off"


def schedule_memories(url: str, db_url: str, interval: str | None, service: str) -> str:
    """Create or update the memory cron under an advisory lock shared by every launcher of this database.

    It is created with the service key: with API keys configured, the cron is the service identity's, so
    it covers every user's chats (a user's cron would cover that user's only).
    """
    from langgraph_sdk import get_client

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext('workspace-agent memory cron'))")
        try:
            cron, outcome = asyncio.run(ensure_memory_cron(get_client(url=url, api_key=service), interval))
        except httpx.HTTPStatusError as exc:
            return f"memory extraction NOT scheduled: {exc.response.status_code} {exc.response.text}"
    return f"memory extraction: {outcome}" + (f" ({cron['schedule']})" if cron else "")


def prepare_model() -> str:
    """Say which model the graphs will use; start the shared local model now rather than at the first turn."""
    from ..core.settings import model_settings
    from ..providers.chat.endpoint import endpoint_url

    settings = model_settings()
    if settings.kind != "local":
        return f"{settings.model} at {settings.base_url}"
    try:
        return f"the embedded local model {settings.model} at {endpoint_url(settings)}"
    except Exception as exc:  # the graphs will report it per turn; serving the rest still makes sense
        return f"NONE: the local model cannot start ({exc}); set OPENAI_BASE_URL"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="serve", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--instances", type=int, default=int(os.environ.get("SERVE_INSTANCES", "1")))
    parser.add_argument("--host", default=os.environ.get("SERVE_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("SERVE_PORT", "2026")))
    parser.add_argument("--config", type=Path, help="langgraph.json (default: ./ or the repo's)")
    parser.add_argument("--log-dir", type=Path, default=os.environ.get("SERVE_LOG_DIR") or None)
    parser.add_argument(
        "--no-restart",
        action="store_true",
        default=os.environ.get("SERVE_RESTART", "1") == "0",
        help="leave a crashed instance down (tests of recovery by the other instances)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Start everything, print ``ready: <urls>``, supervise until SIGTERM or Ctrl-C, then stop it all."""
    args = _parser().parse_args(argv)
    here = Path.cwd() / "langgraph.json"
    config = (args.config or (here if here.exists() else ROOT / "langgraph.json")).resolve()
    if not config.exists():
        _say(f"error: no {config}")
        return 2
    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    interval = os.environ.get("MEMORY_EXTRACTION_INTERVAL")
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    redis_proc, instances, watcher = None, [], None
    try:
        db_url = database_url()
        reserved = RESERVED + (WATCHER_POOL if watching() else 0)
        plan = plan_pools(_max_connections(db_url), args.instances, reserved)
        redis_url = os.environ.get("REDIS_URL")
        if not redis_url:
            try:
                redis_url, redis_proc = start_redis(args.log_dir)
            except FileNotFoundError:
                if args.instances > 1:
                    raise ValueError(
                        "more than one instance needs Redis: install redis-server (make redis), or set "
                        "REDIS_URL"
                    ) from None
                _say("no redis-server: one instance without a broker; a crash leaves its runs 'running'")
        _say(f"database: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded PostgreSQL'}")
        _say(f"pools: {plan.describe()}")
        _say(f"redis: {redis_url or 'none'}")
        _say(f"model: {prepare_model()}")
        service = service_key()
        env = instance_env(db_url, plan, redis_url, config, interval, service)
        instances = [Instance(i, args.host, args.port + i, env, args.log_dir) for i in range(args.instances)]
        for i, instance in enumerate(instances):  # the first migrates the schema alone, then the rest
            instance.start(migrate=i == 0)
            if i == 0:
                instance.wait_healthy()
        for instance in instances[1:]:
            instance.wait_healthy()
        _say(schedule_memories(instances[0].url, db_url, interval, service))
        watcher = start_watcher(env, args.log_dir)
        _say("watched folders: " + ("every WATCH_INTERVAL" if watcher else "off (WATCH_INTERVAL=off)"))
        print(f"ready: {' '.join(i.url for i in instances)}", flush=True)
        down: set[int] = set()
        while not stopping:
            if watcher is not None and watcher.poll() is not None and not stopping:
                _say(f"the folder watcher exited with {watcher.returncode}; restarting")
                watcher = start_watcher(env, args.log_dir)
            for instance in instances:
                code = instance.proc.poll() if instance.proc else None
                if code is None or instance.index in down or stopping:
                    continue
                then = "" if args.no_restart else "; restarting"
                _say(f"instance {instance.index} exited with {code}{then}")
                if args.no_restart:
                    down.add(instance.index)
                else:
                    instance.start(migrate=False)
            time.sleep(0.5)
        return 0
    except (ValueError, RuntimeError, OSError, psycopg.Error) as exc:
        _say(f"error: {exc}")
        return 1
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.terminate()
            watcher.wait(STOP_TIMEOUT)
        for instance in instances:
            instance.stop()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
