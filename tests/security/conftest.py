"""A second ``langgraph dev`` with authentication on, for the tests that act as alice, bob and a stranger.

It runs from its own folder (its own ``.langgraph_api`` records) with a copy of the project's
``langgraph.json`` whose paths point back at the project, and with the deployment's settings: two API keys
and a tool that always asks. The shared ``dev_server`` (authentication off) stays as it is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.helpers import free_port
from tests.support.web_server import WebServer

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"alice": "alice-key-1f0c", "bob": "bob-key-77ad"}
ALWAYS_ASK = "calculate"


def _absolute(config: dict) -> dict:
    """The project's config with every ``./path`` made absolute, so it runs from another folder."""

    def fix(value: object) -> object:
        if isinstance(value, str) and value.startswith("./"):
            return str(ROOT / value[2:])
        if isinstance(value, str) and value == ".":
            return str(ROOT)
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(config)  # type: ignore[return-value]


@pytest.fixture(scope="session")
def secured_server(database_url, llm_server, linked_site: WebServer, tmp_path_factory) -> Iterator[str]:
    """``langgraph dev`` with ``WORKSPACE_AGENT_API_KEYS``, ``ALWAYS_ASK_TOOLS`` and one fetchable site."""
    folder = tmp_path_factory.mktemp("secured")
    (folder / "langgraph.json").write_text(
        json.dumps(_absolute(json.loads((ROOT / "langgraph.json").read_text())))
    )
    log = folder / "dev.log"
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm_server.base_url,
        "WORKSPACE_AGENT_API_KEYS": ",".join(f"{key}:{user}" for user, key in KEYS.items()),
        "ALWAYS_ASK_TOOLS": ALWAYS_ASK,
        "FETCH_ALLOWED_HOSTS": f"127.0.0.1:{linked_site.port}",
    }
    cli = Path(sys.executable).with_name("langgraph")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                str(cli),
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(free_port()),
                "--config",
                "langgraph.json",
            ],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        found = re.search(r"API: \S*?(http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            url = found.group(1)
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"langgraph dev did not start:\n{log.read_text()}")
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
