"""Findings 19.7 and 19.8: the local model's record is checked, and its server takes a key.

``model-server.json`` in the data folder names the shared llama.cpp server: its URL and its pid. Whoever
could write it pointed every prompt at a server of their own and had the next turn, or ``workspace-agent
model stop``, kill any process it named. The record is now believed only for a process that is ours: our
user's, running our model server with the recorded model file, started when the record says, holding the
recorded loopback port; and the record itself must be our user's, readable and writable by no one else.

These tests use real processes (a ``sleep`` standing for a victim, a foreign HTTP server on loopback, the
CLI) and start no model: the model path named is missing, so a start that gets that far fails at once. The
one marked ``local_model`` checks the real server: its record's mode, and that it refuses a request without
its key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from workspace_agent.core.settings import LocalModelError
from workspace_agent.providers.chat.models import ModelEndpointError, chat_model
from workspace_agent.providers.local import model_server
from workspace_agent.providers.local.local_model import thread_count

SETTINGS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHAT_MODEL", "LOCAL_MODEL", "LOCAL_MODEL_THREADS")
SECRET = "the user's confidential question"


class Foreign:
    """An HTTP server on loopback that answers like llama.cpp and remembers every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                seen.append(("GET", self.path, ""))
                self._answer({"status": "ok"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                seen.append(("POST", self.path, body))
                message = {"role": "assistant", "content": "thanks"}
                self._answer(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    }
                )

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def posts(self) -> list[str]:
        return [body for method, _, body in self.requests if method == "POST"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder of its own, the local model chosen (no endpoint), its model file missing."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("WORKSPACE_AGENT_HOME", str(folder))
    monkeypatch.setenv("LOCAL_MODEL_PATH", str(tmp_path / "missing.gguf"))
    model_server.forget_shared_model()
    yield folder
    model_server.forget_shared_model()


@pytest.fixture
def foreign() -> Iterator[Foreign]:
    server = Foreign()
    yield server
    server.httpd.shutdown()


@pytest.fixture
def victim() -> Iterator[subprocess.Popen]:
    """A process of this user's that a forged record names: it must live through everything."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def forge(home: Path, url: str, pid: int, *, wanted: bool = True, mode: int = 0o600) -> None:
    """Write a record as an attacker who can write the data folder would: plausible in every field."""
    record = {
        "base_url": url,
        "model_name": "m",
        "n_ctx": model_server.context_size(),
        "pid": pid,
        "model_path": model_server._wanted_path() if wanted else "/elsewhere/other.gguf",
        "n_threads": thread_count(),
    }
    path = home / "model-server.json"
    path.write_text(json.dumps(record))
    path.chmod(mode)


def alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


async def test_a_forged_record_does_not_receive_the_prompt(home, foreign, victim):
    forge(home, foreign.url, victim.pid)
    with pytest.raises(ModelEndpointError, match=r"missing\.gguf"):  # a new server was started, and failed
        await chat_model().ainvoke(SECRET)
    assert not any(SECRET in body for body in foreign.posts()), "the prompt went to the forged URL"
    assert alive(victim)


def test_a_forged_record_does_not_get_its_pid_killed_by_the_next_start(home, foreign, victim):
    forge(home, foreign.url, victim.pid, wanted=False)  # "another model was running": replace it
    with pytest.raises(LocalModelError, match=r"missing\.gguf"):
        model_server.shared_model_server()
    assert alive(victim), "the start killed the process the record named"


def test_stop_does_not_kill_the_process_a_forged_record_names(home, foreign, victim):
    forge(home, foreign.url, victim.pid)
    assert model_server.stop_shared_model() is False
    assert alive(victim)


def test_the_cli_model_stop_does_not_kill_it_either(home, foreign, victim):
    forge(home, foreign.url, victim.pid)
    cli = [sys.executable, "-m", "workspace_agent.cli.main", "model", "stop"]
    done = subprocess.run(cli, env=os.environ.copy(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "not running" in done.stdout
    assert alive(victim)


def test_a_record_naming_our_own_pid_is_not_believed_either(home, foreign):
    """The pid is ours and alive, but it is not a model server: the command line gives it away."""
    forge(home, foreign.url, os.getpid())
    assert model_server.find_shared_model() is None


@pytest.mark.parametrize(
    "url", ["http://10.0.0.1:8080/v1", "https://127.0.0.1:9/v1", "http://example.com/v1", "file:///x"]
)
def test_a_record_with_a_url_off_loopback_is_not_believed(home, victim, url):
    forge(home, url, victim.pid)
    assert model_server.find_shared_model() is None


def test_a_record_others_may_write_or_read_is_ignored(home, foreign, victim):
    for mode in (0o666, 0o620, 0o644):
        forge(home, foreign.url, victim.pid, mode=mode)
        assert model_server._read(home) is None, oct(mode)
    forge(home, foreign.url, victim.pid, mode=0o600)
    assert model_server._read(home) is not None, "a private record is read (and then checked)"


def test_a_record_is_written_atomically_for_its_owner_only(home):
    model = model_server.RunningModel("http://127.0.0.1:1/v1", "m", 4096, os.getpid(), "/m.gguf", 1)
    model_server._write(home, model)
    record = home / "model-server.json"
    assert record.stat().st_mode & 0o777 == 0o600
    assert model_server._read(home) == model
    assert [p.name for p in home.iterdir()] == ["model-server.json"], "no temporary file is left"
    assert "api_key" in json.loads(record.read_text())
    assert model.api_key not in repr(model) or not model.api_key


@pytest.mark.local_model
def test_the_real_server_takes_a_key_and_its_record_is_private(tmp_path, monkeypatch):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LOCAL_MODEL_PATH", raising=False)
    monkeypatch.setenv("LOCAL_MODEL", "0.5b")
    monkeypatch.setenv("LOCAL_MODEL_THREADS", "1")
    monkeypatch.setenv("LOCAL_MODEL_CONTEXT", "1024")
    monkeypatch.setenv("WORKSPACE_AGENT_HOME", str(tmp_path))
    model_server.forget_shared_model()
    try:
        model = model_server.shared_model_server()
        record = tmp_path / "model-server.json"
        assert record.stat().st_mode & 0o777 == 0o600
        assert model.base_url.startswith("http://127.0.0.1:")
        root = model.base_url.removesuffix("/v1")
        assert httpx.get(root + "/health").status_code == 200, "the health probe needs no key"
        assert httpx.get(model.base_url + "/models").status_code == 401
        ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert httpx.post(model.base_url + "/chat/completions", json=ask).status_code == 401
        wrong = {"Authorization": "Bearer local"}
        assert httpx.get(model.base_url + "/models", headers=wrong).status_code == 401
        kwargs = model.chat_openai_kwargs()
        keyed = {"Authorization": f"Bearer {kwargs['api_key']}"}
        assert httpx.get(model.base_url + "/models", headers=keyed).status_code == 200
        assert chat_model().invoke("Say OK.", max_tokens=2).content is not None, "our client sends the key"
        assert model_server.find_shared_model() == model, "the record of our own server is believed"
        assert asdict(model)["api_key"] == kwargs["api_key"]
    finally:
        assert model_server.stop_shared_model()
