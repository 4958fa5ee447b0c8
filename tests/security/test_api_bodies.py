"""Issue 40, finding 6: a request body a client can send was a 500, or grew the server by hundreds of MB.

JSON nested 2,000 or 100,000 deep was a ``RecursionError`` 500 on every JSON route of ``/v1`` and
``/api/v1``; a content part nested 300 deep (parsed, then refused by the server's own encoder) a
``TypeError`` 500; a ``/v1`` message whose content was ``null``, ``""`` or ``[]`` a failed turn (500); and a
30 MB message on ``/api/v1`` chat was read whole and run (500 after 4 s, the server at 710 MB), where ``/v1``
refused more than 4 MiB before reading it. Now every body gets a 4xx naming what is wrong.

The last tests fuzz both APIs' bodies (hypothesis: odd types for every known field, nesting, empty and
deep values) against a real ``langgraph dev``, asserting no 5xx and a bounded server RSS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security.conftest import _absolute
from tests.support.helpers import free_port
from workspace_agent.samples.scripted_model import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024
JSON = {"content-type": "application/json"}
#: Every route that reads a JSON body, with a body it would take (the deep value is added beside).
JSON_ROUTES = {
    "/v1/chat/completions": {"model": "default", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/embeddings": {"model": "default", "input": "hi"},
    "/api/v1/workspace/default/chat": {"message": "hi"},
    "/api/v1/workspace/default/stream-chat": {"message": "hi"},
    "/api/v1/workspace/default/thread/new": {},
    "/api/v1/workspace/default/thread/t/chat": {"message": "hi"},
    "/api/v1/workspace/default/thread/t/approve": {"message": "hi"},
    "/api/v1/workspace/default/thread/t/stream-chat": {"message": "hi"},
    "/api/v1/workspace/default/vector-search": {"query": "hi"},
    "/api/v1/workspace/default/update-embeddings": {"adds": []},
    "/api/v1/document/raw-text": {"textContent": "hi", "metadata": {"title": "t"}},
    "/api/v1/document/upload-link": {"link": "http://127.0.0.1:9/"},
}
#: What the fuzz saw, reported at the end of the module (``-s``): bodies per API, statuses, RSS.
FIGURES: dict[str, Any] = {"bodies": {}, "statuses": {}, "rss_mb": []}


@pytest.fixture(scope="module")
def body_server(
    database_url: str, llm_server: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int]]:
    """``langgraph dev`` without keys in a folder of its own; yields its URL and process id.

    Its own folder keeps the fuzz's threads out of the shared ``dev_server``'s records; its own process is
    the one whose memory is measured.
    """
    folder = tmp_path_factory.mktemp("bodies")
    (folder / "langgraph.json").write_text(
        json.dumps(_absolute(json.loads((ROOT / "langgraph.json").read_text())))
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WORKSPACE_AGENT_API_KEYS")},
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": llm_server.base_url,
    }
    log = folder / "dev.log"
    cli = Path(sys.executable).with_name("langgraph")
    port = free_port()
    command = [
        str(cli),
        "dev",
        "--no-browser",
        "--no-reload",
        "--port",
        str(port),
        "--config",
        "langgraph.json",
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url, proc.pid
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    if FIGURES["bodies"]:
        print(f"\nfuzz figures: {json.dumps(FIGURES)}")


def rss_mb(pid: int) -> float:
    """The process's resident memory in MB, from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def send(url: str, path: str, body: bytes, timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=body, headers=JSON, timeout=timeout)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [33, 300, 2_000, 100_000])
@pytest.mark.parametrize("path", list(JSON_ROUTES))
def test_deep_json_is_400_on_every_json_route(body_server: tuple[str, int], path: str, depth: int) -> None:
    url, _ = body_server
    beside = json.dumps(JSON_ROUTES[path])[:-1] + ("," if JSON_ROUTES[path] else "")
    for body in (f'{beside}"x": {deep(depth)}}}', deep(depth)):
        response = send(url, path, body.encode())
        assert response.status_code == 400, (path, depth, response.status_code, response.text[:200])
        if body.startswith("{"):
            assert "deeper than 32" in response.text, response.text[:200]


def test_a_content_part_nested_300_deep_is_400(body_server: tuple[str, int]) -> None:
    """Parsed without trouble, then refused by every recursive reader after it (the server's encoder)."""
    url, _ = body_server
    part: dict[str, Any] = {"type": "text", "text": "hi"}
    for _ in range(300):
        part = {"type": "text", "text": "hi", "more": part}
    body = {"model": "default", "messages": [{"role": "user", "content": [part]}]}
    response = send(url, "/v1/chat/completions", json.dumps(body).encode())
    assert response.status_code == 400 and response.json()["error"]["code"] == "too_deep", response.text[:200]


EMPTY = [None, "", [], "   ", [{"type": "text", "text": ""}], [{"type": "no-such-part"}]]


@pytest.mark.parametrize("content", EMPTY, ids=[repr(c) for c in EMPTY])
def test_empty_or_null_content_is_400_naming_the_field(body_server: tuple[str, int], content: Any) -> None:
    url, _ = body_server
    messages = [{"role": "user", "content": "earlier"}, {"role": "user", "content": content}]
    for stream in (False, True):
        body = {"model": "default", "messages": messages, "stream": stream}
        response = send(url, "/v1/chat/completions", json.dumps(body).encode())
        assert response.status_code == 400, response.text[:300]
        error = response.json()["error"]
        assert error["param"] == "messages[1].content" and "messages[1].content is empty" in error["message"]
    if isinstance(content, str):
        response = send(url, "/api/v1/workspace/default/chat", json.dumps({"message": content}).encode())
        assert response.status_code == 400 and response.json()["error"], response.text[:300]


UNUSABLE = [("a\x00b", "NUL"), ("\ud800", "surrogate"), ("x" * 1_000_001, "characters")]


@pytest.mark.parametrize(("text", "says"), UNUSABLE, ids=[says for _, says in UNUSABLE])
def test_a_message_the_graph_refuses_is_400_not_a_failed_turn(
    body_server: tuple[str, int], llm_server: ScriptedLLM, text: str, says: str
) -> None:
    """Text the graph's first node refuses (or no encoder takes) is the client's mistake, said as such."""
    url, _ = body_server
    llm_server.reset()
    chat = {"model": "default", "messages": [{"role": "user", "content": text}]}
    for path, body in (("/v1/chat/completions", chat), ("/api/v1/workspace/default/chat", {"message": text})):
        response = send(url, path, json.dumps(body).encode())
        assert response.status_code == 400 and says in response.text, (path, response.text[:300])
    assert llm_server.requests == [], "no model was asked"


def chunks(size: int) -> Iterator[bytes]:
    """A JSON body of ``size`` bytes of message text, streamed without a declared length."""
    yield b'{"message": "'
    for _ in range(size // MB):
        yield b"x" * MB
    yield b'"}'


@pytest.mark.parametrize("path", ["/api/v1/workspace/default/chat", "/v1/chat/completions"])
def test_a_30_mb_chat_is_413_before_it_is_read(body_server: tuple[str, int], path: str) -> None:
    url, pid = body_server
    before = rss_mb(pid)
    started = time.monotonic()
    declared = send(url, path, b'{"message": "' + b"x" * (30 * MB) + b'"}')
    assert declared.status_code == 413 and "4194304 bytes" in declared.text, declared.text[:200]
    try:
        streamed = httpx.post(f"{url}{path}", content=chunks(30 * MB), headers=JSON, timeout=60)
    except httpx.HTTPError:  # the server may answer and close before the client has sent it all
        pass
    else:
        assert streamed.status_code == 413, streamed.text[:200]
    assert time.monotonic() - started < 10
    assert rss_mb(pid) - before < 64, "the body was not read whole"


# ── the fuzz ───────────────────────────────────────────────────────────────────────────────────────────

DEEP = "@@deep@@"  # replaced by nesting deeper than any bound, in the serialized body
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def now_and_then(
    usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int
) -> st.SearchStrategy[Any]:
    """``usual``, and ``rare`` about one draw in ``one_in``.

    ``one_of`` would pick each about half the time: it merges repeats of a strategy, so repeating ``usual``
    in it gives no weight.
    """
    return st.tuples(usual, rare, st.integers(0, one_in - 1)).map(
        lambda t: t[1] if t[2] == one_in // 2 else t[0]
    )


#: Anything at all for a field; now and then nesting deeper than any bound.
odd = now_and_then(values, st.just(DEEP), 10)
texts = st.text(max_size=40) | st.sampled_from(["", " ", "@agent hello", "a\x00b", "\ud800", "x" * 5000])
#: The last message of most generated chats: a chat must end with the user's, and most should reach a turn.
USER = {"role": "user", "content": "hello"}


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value: mostly ``good``, one draw in four anything at all (odd types, deep nesting)."""
    return now_and_then(good, odd, 4)


def some(*choices: Any) -> st.SearchStrategy[Any]:
    """``mostly`` one of the well-formed ``choices``."""
    return mostly(st.sampled_from(choices))


part = st.fixed_dictionaries(
    {"type": some("text", "text", "image_url", "file", "image", "no-such")},
    optional={
        "text": mostly(texts),
        "image_url": mostly(st.fixed_dictionaries({"url": texts})),
        "file": mostly(st.fixed_dictionaries({}, optional={"file_data": texts, "filename": texts})),
        "base64": texts,
        "mime_type": some("image/png", "text/plain"),
    },
)
message = st.fixed_dictionaries(
    {
        "role": some("user", "user", "assistant", "system", "tool"),
        "content": mostly(texts | st.lists(part, max_size=3)),
    },
    optional={"tool_calls": odd, "name": odd},
)
chats = now_and_then(
    st.lists(message, max_size=2).map(lambda earlier: [*earlier, USER]),
    st.lists(message, min_size=1, max_size=3),
    3,
)
completions = st.fixed_dictionaries(
    {"model": some("default", "default", "no-such-workspace"), "messages": mostly(chats)},
    optional={
        "max_tokens": some(1, 64, 0, 10**9),
        "max_completion_tokens": some(16, 256),
        "temperature": some(0, 0.5, 2, 3),
        "stream": some(True, False),
        "stream_options": mostly(st.fixed_dictionaries({"include_usage": some(True)})),
        "tools": odd,
        "n": odd,
    },
).map(lambda body: ("/v1/chat/completions", body))
embeddings = st.fixed_dictionaries(
    {"model": some("default", "no-such-workspace"), "input": mostly(texts | st.lists(texts, max_size=3))},
    optional={"encoding_format": some("float", "base64"), "dimensions": odd},
).map(lambda body: ("/v1/embeddings", body))
openai_bodies = now_and_then(completions, embeddings, 4)
attachment = st.fixed_dictionaries(
    {},
    optional={
        "name": some("memo.txt", "a.png"),
        "mime": some("text/plain", "image/png", "application/anythingllm-document"),
        "contentString": some("data:text/plain;base64,aGVsbG8=", "data:,", "not base64", ""),
    },
)
slug = now_and_then(st.just("default"), st.just("no-such-workspace"), 8)
anythingllm_chats = st.tuples(
    st.sampled_from(
        ["chat", "chat", "chat", "stream-chat", "stream-chat", "thread/t/chat", "thread/t/stream-chat"]
    ),
    st.fixed_dictionaries(
        {"message": mostly(texts)},
        optional={
            "mode": some("chat", "query", "automatic", "shout"),
            "sessionId": some("fuzz", "") | st.text(max_size=10),
            "attachments": mostly(st.lists(attachment, max_size=2)),
            "reset": some(True, False, False),
            "userId": odd,
        },
    ),
)
searches = st.tuples(
    st.just("vector-search"),
    st.fixed_dictionaries(
        {"query": mostly(texts)}, optional={"topN": some(1, 4, 0, 10**9), "scoreThreshold": some(0, 0.5, 2)}
    ),
)
new_threads = st.tuples(
    st.just("thread/new"), st.fixed_dictionaries({}, optional={"name": mostly(texts), "slug": mostly(texts)})
)
anythingllm_bodies = now_and_then(anythingllm_chats, searches | new_threads, 3).flatmap(
    lambda pair: slug.map(lambda s: (f"/api/v1/workspace/{s}/{pair[0]}", pair[1]))
)


def encoded(body: Any, depth: int) -> bytes:
    """The body as a client may write it: ``NaN`` and lone surrogates as escapes, deep values inline."""
    return json.dumps(body).replace(json.dumps(DEEP), deep(depth)).encode()


def fuzz(url: str, pid: int, api: str, path: str, payload: bytes) -> None:
    """Send one body: no status of 500 or above, no turn that failed (in a stream, after its 200)."""
    response = send(url, path, payload, timeout=120)
    FIGURES["bodies"][api] = FIGURES["bodies"].get(api, 0) + 1
    key = f"{api} {response.status_code}"
    FIGURES["statuses"][key] = FIGURES["statuses"].get(key, 0) + 1
    assert response.status_code < 500, (path, payload[:500], response.status_code, response.text[:500])
    assert "run_failed" not in response.text and "internal_error" not in response.text, response.text[:500]
    if response.status_code == 200:  # a stream's 200 goes out first: a turn failing after it is an abort
        assert '"type": "abort"' not in response.text, (path, payload[:500], response.text[:500])
    FIGURES["peak_rss_mb"] = max(FIGURES.get("peak_rss_mb", 0.0), rss_mb(pid))


#: Examples per fuzz test, chosen to keep the three near a minute: a turn that runs takes about 0.5 s.
FUZZ = settings(
    max_examples=70,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def warm(url: str, pid: int) -> None:
    """One good request of each kind first, so what is loaded once (tokenizer, models) is not counted."""
    if not FIGURES["rss_mb"]:
        for path, body in JSON_ROUTES.items():
            send(url, path, json.dumps(body).encode(), timeout=120)
        FIGURES["rss_mb"].append(round(rss_mb(pid), 1))


def test_fuzz_openai_bodies(body_server: tuple[str, int], llm_server: ScriptedLLM) -> None:
    url, pid = body_server
    llm_server.reset()
    warm(url, pid)

    @FUZZ
    @given(openai_bodies, st.integers(33, 3000))
    def one(case: tuple[str, Any], depth: int) -> None:
        fuzz(url, pid, "/v1", case[0], encoded(case[1], depth))

    one()


def test_fuzz_anythingllm_bodies(body_server: tuple[str, int], llm_server: ScriptedLLM) -> None:
    url, pid = body_server
    llm_server.reset()
    warm(url, pid)

    @settings(FUZZ, max_examples=100)
    @given(anythingllm_bodies, st.integers(33, 3000))
    def one(case: tuple[str, Any], depth: int) -> None:
        fuzz(url, pid, "/api/v1", case[0], encoded(case[1], depth))

    one()


def test_fuzz_any_json_or_bytes_on_every_route(body_server: tuple[str, int]) -> None:
    """Bodies that are no request of either API: any JSON value (deep ones too), any bytes."""
    url, pid = body_server
    anything = st.one_of(
        st.tuples(now_and_then(values, st.just(DEEP), 3), st.integers(33, 3000)).map(lambda p: encoded(*p)),
        st.binary(max_size=64),
        st.sampled_from([b"", b"null", b"[]", b"{", b'{"a": NaN}', b"\xff\xfe"]),
    )

    @settings(FUZZ, max_examples=60)
    @given(st.sampled_from(list(JSON_ROUTES)), anything)
    def one(path: str, payload: bytes) -> None:
        fuzz(url, pid, "/api/v1" if path.startswith("/api/") else "/v1", path, payload)

    one()


def test_memory_stays_bounded_after_the_fuzz(body_server: tuple[str, int]) -> None:
    """Runs after both fuzz tests (file order): the server grew by no more than a few large bodies' worth."""
    _, pid = body_server
    before = FIGURES["rss_mb"][0] if FIGURES["rss_mb"] else rss_mb(pid)
    after = rss_mb(pid)
    FIGURES["rss_mb"].append(round(after, 1))
    assert after - before < 200, FIGURES
    assert FIGURES.get("peak_rss_mb", 0) - before < 250, FIGURES
