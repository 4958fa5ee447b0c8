"""Shared fixtures: a scripted OpenAI-compatible server and the embedded PostgreSQL, both real.

Every test gets fresh workspace and thread names, so tests share one database without seeing each other.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.helpers import free_port
from tests.support.web_server import Answer, WebServer
from workspace_agent.samples.scripted_model import ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
#: A real-model test's time limit: it is there to catch a hang, and a 1.5B model on two busy cores took 84 s
#: for a test alone and over 120 s (pyproject's limit for every other test) beside other work.
LOCAL_MODEL_TIMEOUT = 600


#: Fixtures that start a server process of their own (``langgraph dev``, ``make serve``): a test using one is
#: marked ``servers``, which ``make check`` leaves to ``make test``.
SERVER_FIXTURES = {
    "dev_server",
    "secured_server",
    "serve",
    "served_url",
    "keyed_served_url",
    "serving_env",
    "server_url",
    "body_server",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start servers; give ``local_model`` tests :data:`LOCAL_MODEL_TIMEOUT`.

    A real-model test keeps a limit it set itself, and ``--timeout`` on the command line wins over both.
    """
    limited = config.getoption("timeout", None) is not None
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker(
            "starts_servers"
        ):
            item.add_marker(pytest.mark.servers)
        if item.get_closest_marker("local_model"):
            # under xdist (`make test`), the real model's tests run on one worker, one at a time, while the
            # other worker runs everything else: the model reads and writes on the cores the server tests
            # spend waiting on processes and sockets
            item.add_marker(pytest.mark.xdist_group("local_model"))
            if not limited and not item.get_closest_marker("timeout"):
                item.add_marker(pytest.mark.timeout(LOCAL_MODEL_TIMEOUT))


@pytest.fixture(scope="session", autouse=True)
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A data folder of the test session: embedded database, token cache.

    Its ``models`` is the checkout's own: the pinned models are assembled and verified there once, as
    ``make run`` does, instead of 1.6 GB again in every session's temporary folder.
    """
    path = str(tmp_path_factory.mktemp("home"))
    models = ROOT / ".workspace-agent" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (Path(path) / "models").symlink_to(models, target_is_directory=True)
    os.environ["WORKSPACE_AGENT_HOME"] = path
    os.environ.setdefault("LANGSMITH_TRACING", "false")
    yield path
    from workspace_agent.providers.local.model_server import stop_shared_model

    stop_shared_model()  # a local model server a test started in this data folder


#: Connections the session's own PostgreSQL allows. Each ``make serve`` launcher budgets its instances as if
#: it had the database to itself (``server/pools.py``), as a deployment does; a test session runs several
#: launchers beside ``langgraph dev`` servers on one database, and at PostgreSQL's default of 100 a burst
#: in one could find no connection left ("sorry, too many clients already").
TEST_MAX_CONNECTIONS = 400


def _room_for_launchers(url: str) -> None:
    """Raise the session database's ``max_connections`` to :data:`TEST_MAX_CONNECTIONS` (a restart)."""
    import psycopg

    from workspace_agent.checkpoints.embedded import start_embedded, stop_embedded

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
        if row is not None and int(row[0]) >= TEST_MAX_CONNECTIONS:
            return
        conn.execute(f"ALTER SYSTEM SET max_connections = {TEST_MAX_CONNECTIONS}")
    stop_embedded()
    assert start_embedded() == url, "the restarted server answers on the same socket"


@pytest.fixture(scope="session")
def database_url(home: str) -> Iterator[str]:
    """The embedded PostgreSQL of the session (or ``DATABASE_URL`` when set), stopped at the end."""
    from workspace_agent.checkpoints.embedded import database_url as resolve
    from workspace_agent.checkpoints.embedded import stop_embedded

    given = os.environ.get("DATABASE_URL")
    url = resolve()
    if not given:
        _room_for_launchers(url)
    os.environ["DATABASE_URL"] = url
    yield url
    if not given:
        stop_embedded()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM().start()
    os.environ["OPENAI_BASE_URL"] = server.base_url
    os.environ["OPENAI_API_KEY"] = "test"
    os.environ["CHAT_MODEL"] = "scripted"
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """The scripted model, with an empty script and no recorded requests."""
    llm_server.reset()
    yield llm_server
    llm_server.reset()


@pytest.fixture
async def saver(database_url: str) -> AsyncIterator[object]:
    from workspace_agent.checkpoints.savers import postgres_saver

    async with postgres_saver(database_url) as s:
        yield s


#: The page ``document/upload-link`` may fetch from the keyed server: the one host its deployment allows.
LINKED_PAGE = (
    b"<html><head><title>Heron refunds</title></head><body><h1>Refunds</h1>"
    b"<p>Heron refunds are paid within 14 days of a return, to the card that paid.</p></body></html>"
)


@pytest.fixture(scope="session")
def linked_site() -> Iterator[WebServer]:
    """A loopback site with one page, the only private address the keyed server's ``fetch`` may reach."""
    page = Answer(body=LINKED_PAGE, headers={"Content-Type": "text/html; charset=utf-8"})
    server = WebServer({"/help/refunds.html": lambda _request: page}).start()
    yield server
    server.stop()


@pytest.fixture
def workspace() -> str:
    return f"ws-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def thread() -> dict:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def start_dev_server(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """Start ``langgraph dev`` on a free port with ``env``; return the process and its URL once it answers."""
    cli = Path(sys.executable).with_name("langgraph")
    command = [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(free_port())]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "--config", "langgraph.json"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        found = re.search(r"API: \S*?(http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            try:
                if httpx.get(f"{found.group(1)}/ok", timeout=1).status_code == 200:
                    return proc, found.group(1)
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"langgraph dev did not start:\n{log.read_text()}")


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a server process, killing it if it does not stop within 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def dev_mcp_config(tmp_path_factory) -> Path:
    """The dev server's MCP servers file (its ``MCP_CONFIG``): absent until a test writes it."""
    return tmp_path_factory.mktemp("dev-mcp") / "mcp_servers.json"


@pytest.fixture(scope="session")
def dev_server(database_url, llm_server, tmp_path_factory, dev_mcp_config) -> Iterator[str]:
    """``langgraph dev`` on a free port, persisting to the test PostgreSQL, talking to the scripted model."""
    log = tmp_path_factory.mktemp("dev") / "dev.log"
    env = {
        **os.environ,
        "MCP_CONFIG": str(dev_mcp_config),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm_server.base_url,
    }
    proc, url = start_dev_server(env, log)
    yield url
    stop_process(proc)
