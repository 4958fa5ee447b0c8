"""One local model server per data folder, shared by every process of the checkout.

Whichever process first needs the local model — the CLI, ``langgraph dev``, a program — starts llama.cpp's
server as a detached process of its own and records its address and pid in ``<home>/model-server.json``.
The look-and-start runs under a file lock, so two processes starting at once get one server and no port
clash (llama.cpp picks a free loopback port; the record says which). The server outlives the process that
started it: a CLI and a dev server share one model in memory, and the second start costs a file read.
``workspace-agent model stop`` stops it, as ``workspace-agent db stop`` stops the embedded database.
Its window (``LOCAL_MODEL_CONTEXT``) and threads (``LOCAL_MODEL_THREADS``) are the deployment's settings: a
server running with others is replaced at the next use.

Run as ``python -m workspace_agent.providers.model_server --model FILE`` it is that server.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from workspace_agent.providers.local_model import thread_count
from workspace_agent.providers.model_file import (
    MODEL_PATH_ENV,
    LocalModelError,
    ProgressCallback,
    default_model_cache_dir,
    pinned_model,
    resolve_model_path,
    served_name,
)
from workspace_agent.providers.paths import data_home

#: Tokens the shared server's window holds: ``LOCAL_MODEL_CONTEXT``, default 4096.
CONTEXT_ENV = "LOCAL_MODEL_CONTEXT"
DEFAULT_CONTEXT = 4096
START_TIMEOUT = 120.0
_RECHECK_SECONDS = 5.0
_known: dict[Path, tuple[float, RunningModel]] = {}


@dataclass(frozen=True)
class RunningModel:
    """A live shared model server, as its record describes it."""

    base_url: str
    model_name: str
    n_ctx: int
    pid: int
    model_path: str
    #: Threads llama.cpp computes with; 0 in a record written before the setting existed (so it restarts).
    n_threads: int = 0

    def chat_openai_kwargs(self) -> dict[str, str]:
        """``base_url``, ``api_key`` and ``model`` for ``ChatOpenAI(**kwargs)`` (the server checks no key)."""
        return {"base_url": self.base_url, "api_key": "local", "model": self.model_name}


def context_size() -> int:
    """The window the shared server is started with (``LOCAL_MODEL_CONTEXT`` or 4096)."""
    raw = os.environ.get(CONTEXT_ENV) or str(DEFAULT_CONTEXT)
    try:
        size = int(raw)
    except ValueError:
        raise LocalModelError(f"{CONTEXT_ENV}={raw!r} is not a number of tokens") from None
    if size < 512:
        raise LocalModelError(f"{CONTEXT_ENV}={size} is too small: the model needs at least 512 tokens")
    return size


def _wanted_path() -> str:
    """The GGUF this process would serve, without assembling it (the record is compared with it)."""
    configured = os.environ.get(MODEL_PATH_ENV)
    if configured:
        return str(Path(configured).expanduser().resolve())
    return str(default_model_cache_dir() / pinned_model().filename)


def _serves_wanted(model: RunningModel) -> bool:
    """The server runs with what this process's settings ask for: model file, window and threads."""
    wanted = (_wanted_path(), context_size(), thread_count())
    return (model.model_path, model.n_ctx, model.n_threads) == wanted


def _files(home: Path) -> tuple[Path, Path, Path]:
    return home / "model-server.json", home / "model-server.lock", home / "model-server.log"


def _read(home: Path) -> RunningModel | None:
    try:
        return RunningModel(**json.loads(_files(home)[0].read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _healthy(model: RunningModel) -> bool:
    """The recorded process answers as a llama.cpp server (a pid alone may have been reused)."""
    try:
        os.kill(model.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        return httpx.get(model.base_url.removesuffix("/v1") + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    with _files(home)[1].open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_shared_model() -> RunningModel | None:
    """The live shared server of this data folder, if there is one (a file read and one health check)."""
    home = data_home()
    seen = _known.get(home)
    if seen and time.monotonic() - seen[0] < _RECHECK_SECONDS:
        return seen[1]
    model = _read(home)
    if model is None or not _healthy(model):
        _known.pop(home, None)
        return None
    _known[home] = (time.monotonic(), model)
    return model


def forget_shared_model() -> None:
    """Drop what this process believes about the server, after it failed: the next use looks again."""
    _known.clear()


def shared_model_server(progress: ProgressCallback | None = None) -> RunningModel:
    """The data folder's model server: the live one when it serves this model, else a new one.

    Args:
        progress: Called as ``progress(done_bytes, total_bytes)`` while the model file is first assembled;
            assembly happens here, in the caller, so a CLI can show it.

    Raises:
        LocalModelError: The model cannot be provided, or the server did not come up (its log is quoted).

    """
    home = data_home()
    found = find_shared_model()
    if found and _serves_wanted(found):
        return found
    with _locked(home):
        current = _read(home)
        if current and _healthy(current):
            if _serves_wanted(current):
                return current
            _stop(current)  # another model, window or thread count was asked for: a setting changed
        return _start(home, progress)


def _start(home: Path, progress: ProgressCallback | None) -> RunningModel:
    record, _, log = _files(home)
    record.unlink(missing_ok=True)
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalModelError(
            "the local model needs the 'xllamacpp' package, which is not installed: pip install -e '.[local]'"
        )
    path = resolve_model_path(progress=progress)
    name = served_name(path)
    command = [sys.executable, "-m", __name__, "--model", str(path), "--name", name, "--n-ctx"]
    with log.open("ab") as out:
        child = subprocess.Popen(
            [*command, str(context_size()), "--threads", str(thread_count())],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not stopped by the starter's Ctrl-C or exit
            env={**os.environ, "WORKSPACE_AGENT_HOME": str(home)},
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise LocalModelError(f"the local model server exited with {child.returncode}:\n{tail}")
        model = _read(home)
        if model is not None and model.pid == child.pid and _healthy(model):
            _known[home] = (time.monotonic(), model)
            return model
        time.sleep(0.1)
    child.kill()
    raise LocalModelError(f"the local model server did not start within {START_TIMEOUT:.0f} s; see {log}")


def _stop(model: RunningModel, wait: float = 15.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(model.pid, signal.SIGTERM)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):  # reap it if this process started it
                os.waitpid(model.pid, os.WNOHANG)
            os.kill(model.pid, 0)
            time.sleep(0.1)
        os.kill(model.pid, signal.SIGKILL)


def stop_shared_model() -> bool:
    """Stop this data folder's model server; False when none was running."""
    home = data_home()
    with _locked(home):
        model = _read(home)
        _known.pop(home, None)
        _files(home)[0].unlink(missing_ok=True)
        if model is None or not _healthy(model):
            return False
        _stop(model)
        return True


def main(argv: list[str] | None = None) -> None:
    """Serve one model until SIGTERM, with its address recorded for the other processes."""
    from workspace_agent.providers.local_model import LocalModelServer

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_CONTEXT)
    parser.add_argument("--threads", type=int, default=None, help="default: LOCAL_MODEL_THREADS's rule")
    args = parser.parse_args(argv)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopped.set())
    server = LocalModelServer(
        Path(args.model), model_name=args.name, n_ctx=args.n_ctx, n_threads=args.threads
    ).start()
    model = RunningModel(
        server.base_url, server.model_name, server.n_ctx, os.getpid(), args.model, server.n_threads
    )
    record = _files(data_home())[0]
    temp = record.with_suffix(".tmp")
    temp.write_text(json.dumps(asdict(model)))
    os.replace(temp, record)  # readers see the whole record or none
    print(f"serving {model.model_name} at {model.base_url} (pid {model.pid})", flush=True)
    stopped.wait()
    if _read(data_home()) == model:
        record.unlink(missing_ok=True)
    server.stop()


if __name__ == "__main__":
    main()
