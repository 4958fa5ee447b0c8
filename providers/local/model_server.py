"""One local model server per data folder, shared by every process of the checkout.

Whichever process first needs the local model — the CLI, ``langgraph dev``, a program — starts llama.cpp's
server as a detached process of its own and records its address and pid in ``<home>/model-server.json``.
The look-and-start runs under a file lock, so two processes starting at once get one server and no port
clash (llama.cpp picks a free loopback port; the record says which). The server outlives the process that
started it: a CLI and a dev server share one model in memory, and the second start costs a file read.
``workspace-agent model stop`` stops it, as ``workspace-agent db stop`` stops the embedded database.

The record is believed only when it can be trusted, because whoever could write it would otherwise choose
where every prompt goes and which process the next start or ``model stop`` kills: the record must be this
user's, readable and writable by no one else (it is written so, atomically), and it must name a process
that is ours — this user's, running this module with the recorded model file, started at the recorded time
(a pid can be reused), and listening on the recorded loopback port. The server binds to loopback and takes
a random key made when it starts, kept only in that private record, so no other local user can use it.
Its window (``LOCAL_MODEL_CONTEXT``) and threads (``LOCAL_MODEL_THREADS``) are the deployment's settings: a
server running with others is replaced at the next use.

Run as ``python -m workspace_agent.providers.local.model_server --model FILE`` it is that server.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from ipaddress import ip_address
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ...core.settings import DEFAULT_CONTEXT, context_size
from ..paths import data_home
from .local_model import batch_thread_count, thread_count
from .model_file import (
    MODEL_PATH_ENV,
    LocalModelError,
    ProgressCallback,
    default_model_cache_dir,
    pinned_model,
    resolve_model_path,
    served_name,
)

#: Tokens the shared server's window holds: ``LOCAL_MODEL_CONTEXT``, default 4096.
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
    #: When the process started, in clock ticks after boot (``/proc/<pid>/stat``): a reused pid differs.
    started: int = 0
    #: The key the server takes; only the private record holds it.
    api_key: str = field(default="", repr=False)
    #: Threads llama.cpp reads prompts with; 0 in a record written before the setting existed.
    n_batch_threads: int = 0

    def chat_openai_kwargs(self) -> dict[str, str]:
        """``base_url``, ``api_key`` and ``model`` for ``ChatOpenAI(**kwargs)``: the server's own key."""
        return {"base_url": self.base_url, "api_key": self.api_key or "local", "model": self.model_name}


def _wanted_path() -> str:
    """The GGUF this process would serve, without assembling it (the record is compared with it)."""
    configured = os.environ.get(MODEL_PATH_ENV)
    if configured:
        return str(Path(configured).expanduser().resolve())
    return str(default_model_cache_dir() / pinned_model().filename)


def _serves_wanted(model: RunningModel) -> bool:
    """The server runs with what this process's settings ask for: model file, window and threads."""
    wanted = (_wanted_path(), context_size(), thread_count(), batch_thread_count())
    return (model.model_path, model.n_ctx, model.n_threads, model.n_batch_threads) == wanted


def _files(home: Path) -> tuple[Path, Path, Path]:
    return home / "model-server.json", home / "model-server.lock", home / "model-server.log"


def _read(home: Path) -> RunningModel | None:
    """The record, if it is this user's own file that no one else may read or write; else ``None``."""
    try:
        fd = os.open(_files(home)[0], os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        try:
            return RunningModel(**json.loads(handle.read()))
        except (OSError, ValueError, TypeError):
            return None


def _write(home: Path, model: RunningModel) -> None:
    """Write the record for its owner only (0600), whole: readers see the old record or the new one."""
    record = _files(home)[0]
    temp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(asdict(model)))
    os.replace(temp, record)


def _proc(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def _started(pid: int) -> int:
    """When the process started, in clock ticks after boot (field 22 of ``/proc/<pid>/stat``)."""
    stat = _proc(pid, "stat")
    return int(stat[stat.rindex(b")") + 2 :].split()[19])  # the name in parentheses may hold spaces


def _loopback_port(url: str) -> int | None:
    """The port of a plain-HTTP loopback URL ending in ``/v1``; ``None`` for any other URL."""
    try:
        parts = urlsplit(url)
        host, port = ip_address(parts.hostname or ""), parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or not host.is_loopback or port is None or parts.path != "/v1":
        return None
    return port


def _listening(pid: int, port: int) -> bool:
    """Whether the process holds a socket listening on ``port`` (``/proc/net/tcp*`` against its fds)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    fds = Path(f"/proc/{pid}/fd")
    return any(os.readlink(fds / fd) in inodes for fd in os.listdir(fds) if os.path.exists(fds / fd))


def _ours(model: RunningModel) -> bool:
    """Whether the record names our model server, the only process that is talked to or signalled.

    Ours means: this user's process, running this module with the recorded model file, started at the
    recorded time (a pid can be reused), and listening on the recorded loopback port.
    """
    port = _loopback_port(model.base_url)
    if port is None or model.pid <= 0:
        return False
    try:
        if os.stat(f"/proc/{model.pid}").st_uid != os.getuid():
            return False
        argv = _proc(model.pid, "cmdline").decode(errors="replace").split("\0")
        ours = any(argv[i : i + 2] == ["-m", __name__] for i in range(len(argv)))
        serving = any(argv[i : i + 2] == ["--model", model.model_path] for i in range(len(argv)))
        return ours and serving and _started(model.pid) == model.started and _listening(model.pid, port)
    except (OSError, ValueError, IndexError):
        return False


def _healthy(model: RunningModel) -> bool:
    """The recorded process is our model server (see ``_ours``) and answers as one."""
    if not _ours(model):
        return False
    headers = {"Authorization": f"Bearer {model.api_key}"}
    try:
        url = model.base_url.removesuffix("/v1") + "/health"
        return httpx.get(url, headers=headers, timeout=2).status_code == 200
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
    command = [sys.executable, "-m", __name__, "--model", str(path), "--name", name]
    command += ["--n-ctx", str(context_size()), "--threads", str(thread_count())]
    command += ["--batch-threads", str(batch_thread_count())]
    with log.open("ab") as out:
        child = subprocess.Popen(
            command,
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
    """Stop our model server (the caller checked ``_healthy``); a process that is not ours is left alone."""
    if not _ours(model):
        return
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
    from .local_model import LocalModelServer

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_CONTEXT)
    parser.add_argument("--threads", type=int, default=None, help="default: LOCAL_MODEL_THREADS's rule")
    parser.add_argument(
        "--batch-threads", type=int, default=None, help="default: LOCAL_MODEL_BATCH_THREADS's"
    )
    args = parser.parse_args(argv)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopped.set())
    key = secrets.token_urlsafe(32)
    server = LocalModelServer(
        Path(args.model),
        model_name=args.name,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_batch_threads=args.batch_threads,
        api_key=key,
    ).start()
    pid = os.getpid()
    model = RunningModel(
        server.base_url,
        server.model_name,
        server.n_ctx,
        pid,
        args.model,
        server.n_threads,
        _started(pid),
        key,
        server.n_batch_threads,
    )
    record = _files(data_home())[0]
    _write(data_home(), model)
    print(f"serving {model.model_name} at {model.base_url} (pid {model.pid})", flush=True)
    stopped.wait()
    if _read(data_home()) == model:
        record.unlink(missing_ok=True)
    server.stop()


if __name__ == "__main__":
    main()
