"""A chat model that runs inside a process, so the project works with no API key and no network.

llama.cpp's own OpenAI-compatible HTTP server, from the prebuilt ``xllamacpp`` wheel, serves the pinned
model file (see ``model_file``) on a loopback port, and the rest of the project talks to it with the same
``ChatOpenAI`` client it uses for a hosted model. ``model_server`` runs one such server as a process of its
own that every process of a checkout shares; this module is the server itself.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
from pathlib import Path
from typing import Any

from ...core.settings import DEFAULT_CONTEXT
from .model_file import (
    PINS,
    LocalModelError,
    ModelIntegrityError,
    ModelPin,
    ProgressCallback,
    assemble_model,
    default_model_cache_dir,
    ensure_model_file,
    fetch_chunks,
    find_model_chunks,
    locate_distribution_file,
    open_chunk,
    pinned_model,
    resolve_model_path,
    served_name,
    sha256_file,
)

__all__ = [
    "DEFAULT_CONTEXT",
    "PINS",
    "THREADS_ENV",
    "LocalModelError",
    "LocalModelServer",
    "ModelIntegrityError",
    "ModelPin",
    "ProgressCallback",
    "assemble_model",
    "default_model_cache_dir",
    "ensure_local_model_server",
    "ensure_model_file",
    "fetch_chunks",
    "find_model_chunks",
    "locate_distribution_file",
    "open_chunk",
    "pinned_model",
    "resolve_model_path",
    "served_name",
    "sha256_file",
    "thread_count",
]


def _available_cores() -> int:
    """Count the cores this process may run on, which in a container can be fewer than the machine has."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


#: The deployment's setting of the threads llama.cpp computes with (else :func:`default_threads`).
THREADS_ENV = "LOCAL_MODEL_THREADS"


def default_threads(cores: int) -> int:
    """Threads when the deployment sets none: all cores but one, and 1 on a machine of one or two cores.

    llama.cpp's threads meet after every step, so one thread without a core stalls the others. On 2 cores
    that other work keeps busy (the database, the agent, other programs), 2 threads generated 3-6x slower
    than 1 (``bench/model_threads.py``, figures in the README). A core left to the rest makes that less
    likely; a deployment that knows its machine sets ``LOCAL_MODEL_THREADS``.
    """
    return max(1, cores - 1)


#: The deployment's setting of the threads llama.cpp reads a prompt with (else every usable core).
BATCH_THREADS_ENV = "LOCAL_MODEL_BATCH_THREADS"


def _setting(name: str, default: int, cores: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        threads = int(raw)
    except ValueError:
        raise LocalModelError(f"{name}={raw!r} is not a number of threads") from None
    if not 1 <= threads <= cores:
        raise LocalModelError(f"{name}={threads} is out of range: 1 to {cores}, the cores usable here")
    return threads


def batch_thread_count() -> int:
    """The threads a prompt is read with: ``LOCAL_MODEL_BATCH_THREADS``, else every usable core.

    Reading a prompt is a few large matrix products per layer, not one small step per token, so a thread
    that loses its core for a moment costs a little, not a stall at every token. On 2 cores the 1.5B read
    2.1x faster with 2 threads than with 1 when the machine was quiet, 1.5x when it was very busy, and 0.73x
    at a load of 4-5, where generation fell 4x (README, "Threads"). Reading is most of a new turn's wait
    (a 460-token prompt: about 38 s on one thread), so the quiet case decides the default.

    Raises:
        LocalModelError: The setting is not a whole number from 1 to the usable cores.
    """
    cores = _available_cores()
    return _setting(BATCH_THREADS_ENV, cores, cores)


def thread_count() -> int:
    """The threads a server is started with: ``LOCAL_MODEL_THREADS``, else :func:`default_threads`.

    More threads than the usable cores is refused: a thread without a core stalls all the others.

    Raises:
        LocalModelError: The setting is not a whole number from 1 to the usable cores.

    """
    cores = _available_cores()
    return _setting(THREADS_ENV, default_threads(cores), cores)


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server, running in this process on a free loopback port.

    The server lives exactly as long as the ``xllamacpp.Server`` object this class holds: llama.cpp shuts
    it down in that object's destructor, so :meth:`stop` drops the reference and collects it.

    Example:
        >>> with LocalModelServer() as server:  # doctest: +SKIP
        ...     llm = ChatOpenAI(**server.chat_openai_kwargs())

    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model_name: str | None = None,
        n_ctx: int = DEFAULT_CONTEXT,
        n_threads: int | None = None,
        n_batch_threads: int | None = None,
        cache_dir: Path | None = None,
        progress: ProgressCallback | None = None,
        verbose: bool = False,
        api_key: str | None = None,
    ) -> None:
        """Describe the server; nothing is loaded until :meth:`start`.

        Args:
            model_path: A GGUF to serve; by default :func:`resolve_model_path` decides (env var or pin).
            model_name: The name the server answers to; defaults to the pinned model's name, or to the
                file's stem for a user's own GGUF.
            n_ctx: Context window in tokens.
            n_threads: Threads for generation; :func:`thread_count` by default.
            n_batch_threads: Threads for reading the prompt; :func:`batch_thread_count` by default.
            cache_dir: Where the pinned model is assembled.
            progress: Called during a first-time assembly.
            verbose: Let llama.cpp log its informational lines; by default it prints only errors, which
                keeps a CLI's output clean.
            api_key: The key every request but the health probe must carry (``Authorization: Bearer``);
                without one, any local user can use the server.

        """
        self._model_path = model_path
        self._model_name = model_name
        self.n_ctx = n_ctx
        self.n_threads = n_threads or thread_count()
        self.n_batch_threads = n_batch_threads or batch_thread_count()
        self._cache_dir = cache_dir
        self._progress = progress
        self._verbose = verbose
        self._api_key = api_key
        self._server: Any = None
        self._address: str | None = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """The model name to send in requests (the server serves one model and lists it under this name)."""
        if self._model_name:
            return self._model_name
        if self._model_path is not None:
            return served_name(self._model_path)
        return pinned_model().name

    @property
    def model_path(self) -> Path | None:
        """The GGUF being served, known once :meth:`start` has resolved it."""
        return self._model_path

    @property
    def is_running(self) -> bool:
        """Whether the server is up."""
        return self._server is not None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in ``/v1``, for ``ChatOpenAI(base_url=...)``.

        Raises:
            LocalModelError: The server is not running.

        """
        if self._address is None:
            raise LocalModelError("the local model server is not running: call start() first")
        return f"{self._address}/v1"

    def chat_openai_kwargs(self) -> dict[str, str]:
        """Return ``base_url``, ``api_key`` and ``model`` for ``ChatOpenAI(**kwargs, ...)``.

        Without a key of its own the server checks none, but the OpenAI client insists on one being set.
        """
        return {"base_url": self.base_url, "api_key": self._api_key or "local", "model": self.model_name}

    def start(self) -> LocalModelServer:
        """Resolve (and if needed assemble) the model, load it, and start serving; a no-op when running.

        Returns:
            ``self``, so ``server = LocalModelServer().start()`` reads naturally.

        Raises:
            LocalModelError: ``xllamacpp`` is missing or llama.cpp could not load the model.
            ModelIntegrityError: The pinned model's hash did not match.

        """
        with self._lock:
            if self._server is not None:
                return self
            try:
                # the compiled module that defines them: the package re-exports it with ``*``, which a type
                # checker cannot follow into a binary
                from xllamacpp.xllamacpp import CommonParams, Server
            except ImportError as error:
                raise LocalModelError(
                    "the local model needs the 'xllamacpp' package: pip install 'xllamacpp==2026.10.11549'"
                ) from error
            if self._model_path is None:
                self._model_path = resolve_model_path(self._cache_dir, self._progress)
            params = CommonParams()
            params.model.path = str(self._model_path)
            params.model_alias = {self.model_name}
            # Jinja renders the model's own chat template, which is what makes tool and JSON prompts work.
            params.use_jinja = True
            params.n_ctx = self.n_ctx
            params.cpuparams.n_threads = self.n_threads
            params.cpuparams_batch.n_threads = self.n_batch_threads
            params.ui = False
            params.hostnames = ["127.0.0.1"]  # loopback only, whatever llama.cpp's default becomes
            if self._api_key:
                params.api_keys = [self._api_key]
            params.verbosity = 3 if self._verbose else 1
            # Needed for the readiness round trip below; /metrics answers only on loopback anyway.
            params.endpoint_metrics = True
            try:
                server = Server(params)
            except RuntimeError as error:
                raise LocalModelError(f"llama.cpp could not serve {self._model_path}: {error}") from error
            # Server() returns just before llama.cpp's task loop starts, and a shutdown requested in that
            # gap is lost: the destructor then waits for the loop forever, holding the GIL (seen here
            # about one time in two when stopping right after starting). A metrics request is answered by
            # that loop, so once it returns, stop() is safe. It costs well under a millisecond.
            server.handle_metrics()
            self._server = server
            self._address = str(server.listening_address).rstrip("/")
            return self

    def stop(self) -> None:
        """Shut the server down and free the model's memory; safe to call twice."""
        with self._lock:
            server, self._server, self._address = self._server, None, None
            if server is not None:
                del server
                gc.collect()

    def __enter__(self) -> LocalModelServer:
        """Start the server for the length of a ``with`` block."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop the server when the ``with`` block ends."""
        self.stop()


_shared_server: LocalModelServer | None = None
_shared_lock = threading.Lock()


def ensure_local_model_server(progress: ProgressCallback | None = None) -> LocalModelServer:
    """Return the process-wide local model server, starting it on first use.

    One model in memory per process is enough (llama.cpp queues requests), and loading it costs seconds,
    so every caller — CLI, graph nodes, tests — shares this one. It is stopped when the interpreter exits,
    which shuts llama.cpp's threads down in order rather than in the middle of teardown.

    Args:
        progress: Called as ``progress(done_bytes, total_bytes)`` if the model must first be assembled.

    Returns:
        The running server; use ``base_url`` and ``model_name`` (or ``chat_openai_kwargs()``).

    """
    global _shared_server
    with _shared_lock:
        if _shared_server is None:
            _shared_server = LocalModelServer(progress=progress)
            atexit.register(_shared_server.stop)
        else:
            _shared_server._progress = progress
        return _shared_server.start()
