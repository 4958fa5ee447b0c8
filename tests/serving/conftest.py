"""Fixtures for the served graphs: ``make serve``'s launcher started for real, on the test PostgreSQL.

The launcher runs in the serving venv (Python >= 3.12, set up by ``make serve-setup`` exactly as ``make
serve`` does), talks to the session's scripted OpenAI-compatible server, and is stopped by SIGTERM like a
person's Ctrl-C. These tests are skipped only when no Python >= 3.12 exists on the machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.helpers import free_port
from workspace_agent.samples.scripted_model import last_user_text, text_reply, tool_reply

ROOT = Path(__file__).resolve().parents[2]
SERVE_PYTHON = ROOT / ".venv-serve" / "bin" / "python"
FAST_LEASES = {
    "LEASE_DURATION_SECONDS": "9",
    "HEARTBEAT_INTERVAL_SECONDS": "3",
    "REAPER_INTERVAL_SECONDS": "3",
}


def _serving_python() -> str:
    """The Python the Makefile would build the serving venv with ('' when there is none)."""
    probe = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "--eval",
            "serve-python: ; @echo $(SERVE_PYTHON)",
            "serve-python",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip()


@pytest.fixture(scope="session")
def serving_env() -> Path:
    """The serving venv, made by the Makefile (a no-op when it is up to date)."""
    if not _serving_python():
        pytest.skip("no Python >= 3.12 on this machine: make serve cannot run here")
    done = subprocess.run(["make", "-s", "serve-setup"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"make serve-setup failed:\n{done.stdout}\n{done.stderr}"
    return SERVE_PYTHON


class Served:
    """One launcher process (``python -m workspace_agent.server.serve``) and its instances."""

    def __init__(self, python: Path, log_dir: Path, env: dict[str, str], instances: int, port: int) -> None:
        self.log_dir, self.instances, self.port = log_dir, instances, port
        self.out = log_dir / "launcher.log"
        self.env = env
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.urls: list[str] = []

    def _spawn(self) -> None:
        with self.out.open("a") as out:
            self.proc = subprocess.Popen(
                [str(self.python), "-m", "workspace_agent.server.serve"],
                cwd=ROOT,
                env={**self.env, "SERVE_INSTANCES": str(self.instances), "SERVE_PORT": str(self.port)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def start(self, timeout: float = 150) -> Served:
        """Start and wait for the launcher's ``ready:`` line."""
        self._spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = re.findall(r"^ready: (.+)$", self.out.read_text(), re.M)
            if ready:
                self.urls = ready[-1].split()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        pytest.fail(f"make serve did not come up:\n{self.logs()}")

    def run_to_failure(self, timeout: float = 150) -> tuple[int, str]:
        """Run a launcher expected not to come up: its exit code and what it printed."""
        self._spawn()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"the launcher kept running:\n{self.logs()}")
        return code, self.out.read_text()

    def stop(self) -> None:
        """SIGTERM, as Ctrl-C would; the launcher stops its instances and Redis."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def instance_pids(self) -> set[int]:
        """The pids of the launcher's uvicorn children."""
        assert self.proc is not None
        children = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid), "-f", "aegra_api"], capture_output=True, text=True
        )
        return {int(p) for p in children.stdout.split()}

    def logs(self) -> str:
        """Everything the launcher and its instances wrote, for failure messages."""
        return "\n".join(f"== {p.name}\n{p.read_text()[-4000:]}" for p in sorted(self.log_dir.glob("*.log")))


def _launch(
    python: Path,
    database_url: str,
    llm_server,
    tmp: pytest.TempPathFactory,
    instances: int,
    port: int | None = None,
    ready: bool = True,
    **env: str,
) -> Served:
    log_dir = tmp.mktemp("serve")
    base = {
        **os.environ,
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": "test",
        "CHAT_MODEL": "scripted",
        "SERVE_LOG_DIR": str(log_dir),
        "MEMORY_EXTRACTION_INTERVAL": "off",
        # many launchers share the test database: the folder watcher only where a test asks for it
        "WATCH_INTERVAL": "off",
        "LOG_LEVEL": "WARNING",
    }
    served = Served(python, log_dir, base | env, instances, port or free_port(instances))
    return served.start() if ready else served


@pytest.fixture
def serve(
    serving_env: Path, database_url: str, llm_server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Served]]:
    """Start launchers: ``serve(instances=1, port=None, ready=True, **env)``; all are stopped at the end.

    With ``ready=False`` the launcher is only prepared, for a test that expects it to fail.
    """
    started: list[Served] = []

    def start(instances: int = 1, port: int | None = None, ready: bool = True, **env: str) -> Served:
        started.append(
            _launch(serving_env, database_url, llm_server, tmp_path_factory, instances, port, ready, **env)
        )
        return started[-1]

    yield start
    for served in started:
        served.stop()


@pytest.fixture(scope="session")
def served_url(serving_env: Path, database_url: str, llm_server, tmp_path_factory) -> Iterator[str]:
    """One ``make serve`` instance shared by the tests that do not restart or kill it."""
    served = _launch(serving_env, database_url, llm_server, tmp_path_factory, 1)
    yield served.urls[0]
    served.stop()


@pytest.fixture(scope="session")
def keyed_served_url(serving_env: Path, database_url: str, llm_server, tmp_path_factory) -> Iterator[str]:
    """One ``make serve`` instance with the security tests' API keys, shared by the API route tests."""
    from tests.security.conftest import KEYS

    keys = ",".join(f"{key}:{user}" for user, key in KEYS.items())
    served = _launch(
        serving_env, database_url, llm_server, tmp_path_factory, 1, WORKSPACE_AGENT_API_KEYS=keys
    )
    yield served.urls[0]
    served.stop()


def approval_rule(request: dict) -> dict:
    """The model of these tests: asks to save the user's message as a note, then reports the tool's answer.

    A message containing ``slow`` is answered after a delay the first time only, so a run can be caught
    mid-flight and its re-run after a crash is quick.
    """
    messages = request.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return text_reply(f"done: {messages[-1].get('content')}")
    text = last_user_text(request)
    if "slow" in text:
        first = text not in approval_rule.seen  # type: ignore[attr-defined]
        approval_rule.seen.add(text)  # type: ignore[attr-defined]
        return {**text_reply(f"answered {text}"), "delay": 8 if first else 0}
    if "save_note" in {t["function"]["name"] for t in request.get("tools", [])}:
        return tool_reply(("save_note", {"text": text}))
    return text_reply(f"answered {text}")


approval_rule.seen = set()  # type: ignore[attr-defined]


@pytest.fixture
def approvals(llm, monkeypatch):
    """The scripted model with ``approval_rule``."""
    monkeypatch.setattr(llm, "rule", approval_rule)
    return llm
