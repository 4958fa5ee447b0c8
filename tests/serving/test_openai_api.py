"""Issue 21, items 2, 4 and 5 for ``/v1``: the OpenAI-compatible routes, driven by the real ``openai`` SDK.

The same checks run against ``langgraph dev`` with API keys (``secured_server``) and against ``make serve``
(Aegra), both mounting ``server/http_app.py`` from the project's ``langgraph.json``. The scripted model
plays the model; what reached it (``llm.requests``) shows the prompt, the history and the reply limit.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from pathlib import Path

import httpx
import openai
import psycopg
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.support.helpers import until_settled
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.documents import embedder

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "workspace" / "faq.md"
KEY_SETTING = ",".join(f"{key}:{user}" for user, key in KEYS.items())


def sdk(url: str, user: str | None = "alice", key: str | None = None) -> openai.AsyncOpenAI:
    """The OpenAI SDK pointed at a server's ``/v1``, with a user's key (or ``key`` as given)."""
    return openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key=key or KEYS.get(user or "", "none"), max_retries=0
    )


async def make_workspace(url: str, user: str, workspace: str, **context: object) -> str:
    """A workspace of ``user``'s: an assistant of the agent graph with that context."""
    client = get_client(url=url, api_key=KEYS[user])
    assistant = await client.assistants.create("agent", context={"workspace": workspace, **context})
    return assistant["assistant_id"]


def logged(database_url: str, workspace: str) -> list[tuple[str, str, str]]:
    """The workspace's chat log rows: user, prompt, response."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT user_id, prompt, response FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,)
        ).fetchall()
    return [tuple(r) for r in rows]


def user_texts(request: dict) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") in ("user", "assistant")]


async def check_chat_and_models(url: str, llm, workspace: str, database_url: str) -> None:
    """Models, a non-streamed and a streamed completion, and what reached the model, as alice."""
    await make_workspace(url, "alice", workspace, system_prompt="The workspace's own prompt.")
    alice = sdk(url, "alice")
    ids = [m.id for m in (await alice.models.list()).data]
    assert workspace in ids and "default" in ids

    llm.reset()
    llm.push(text_reply("Paris, as before."))
    done = await alice.chat.completions.create(
        model=workspace,
        messages=[
            {"role": "system", "content": "You are the request's own prompt."},
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "And again?"},
        ],
        max_tokens=123,
        temperature=0.3,
    )
    assert done.object == "chat.completion" and done.model == workspace
    assert done.choices[0].message.content == "Paris, as before."
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0
    assert done.model_extra is not None and done.model_extra["sources"] == []
    request = llm.requests[-1]
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][0]["content"].startswith("You are the request's own prompt.")
    assert "workspace's own prompt" not in request["messages"][0]["content"]
    assert user_texts(request)[-3:] == ["What is the capital of France?", "Paris.", "And again?"]
    asked = request.get("max_completion_tokens", request.get("max_tokens"))  # langchain-openai's name varies
    assert (asked, request.get("temperature")) == (123, 0.3), "the request's own settings reach the model"
    assert logged(database_url, workspace) == [("alice", "And again?", "Paris, as before.")]

    llm.push(text_reply("A streamed answer in several pieces of text."))
    stream = await alice.chat.completions.create(
        model=workspace,
        messages=[{"role": "user", "content": "Stream it."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "A streamed answer in several pieces of text."
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    assert finish[0].model_extra is not None and finish[0].model_extra["sources"] == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert logged(database_url, workspace)[-1] == ("alice", "Stream it.", text)
    # No thread of these stateless calls is left behind in alice's list.
    threads = await get_client(url=url, api_key=KEYS["alice"]).threads.search(metadata={"via": "openai-api"})
    assert threads == []


async def check_embeddings(url: str, workspace: str) -> None:
    """Embeddings come from the deployment's embedder, as floats and as the SDK's default base64."""
    texts = ["the quick brown fox", "a lazy dog"]
    got = await sdk(url, "alice").embeddings.create(model=workspace, input=texts)
    floats = await sdk(url, "alice").embeddings.create(model=workspace, input=texts, encoding_format="float")
    model, _ = await embedder()
    expected = await model.aembed_documents(texts)
    for result in (got, floats):
        assert [d.index for d in result.data] == [0, 1]
        for item, want in zip(result.data, expected, strict=True):
            assert len(item.embedding) == len(want)
            assert math.isclose(
                sum(a * b for a, b in zip(item.embedding, want, strict=True)), 1.0, abs_tol=1e-3
            )


async def check_refusals(url: str, workspace: str) -> None:
    """No key or a wrong key, another user's workspace, an unknown model, malformed bodies."""
    with pytest.raises(openai.AuthenticationError) as refused:
        await sdk(url, key="wrong-key").models.list()
    assert refused.value.status_code == 401
    for headers in ({}, {"Authorization": "Bearer wrong-key"}, {"x-api-key": "wrong-key"}):
        response = httpx.get(f"{url}/v1/models", headers=headers, timeout=10)
        assert response.status_code == 401
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    bob = sdk(url, "bob")
    assert workspace not in [m.id for m in (await bob.models.list()).data]
    for call in (
        bob.chat.completions.create(model=workspace, messages=[{"role": "user", "content": "hi"}]),
        bob.embeddings.create(model=workspace, input="hi"),
        sdk(url, "alice").chat.completions.create(
            model="no-such-ws", messages=[{"role": "user", "content": "x"}]
        ),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            await call
        assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    headers = {"Authorization": f"Bearer {KEYS['alice']}"}
    for body in (
        {"model": workspace, "messages": []},
        {"model": workspace, "messages": [{"role": "wizard", "content": "x"}]},
        {"model": workspace, "messages": [{"role": "user", "content": 42}]},
        {"model": workspace, "messages": [{"role": "assistant", "content": "only me"}]},
        {"model": workspace, "messages": [{"role": "user", "content": "x"}], "max_tokens": "many"},
        {"messages": [{"role": "user", "content": "x"}]},
    ):
        response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=10)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    too_long = {"model": workspace, "messages": [{"role": "user", "content": "x"}], "max_tokens": 10**7}
    response = httpx.post(f"{url}/v1/chat/completions", json=too_long, headers=headers, timeout=10)
    assert response.status_code == 400 and response.json()["error"]["param"] == "max_tokens"
    garbage = httpx.post(f"{url}/v1/chat/completions", content=b"{not json", headers=headers, timeout=10)
    assert garbage.status_code == 400
    huge = {"model": workspace, "messages": [{"role": "user", "content": "x" * (5 * 1024 * 1024)}]}
    response = httpx.post(f"{url}/v1/chat/completions", json=huge, headers=headers, timeout=30)
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"


async def check_agent_approval(url: str, llm, workspace: str, database_url: str) -> None:
    """``@agent`` runs tools, but one that needs approval is not run: the answer names it and says why."""
    llm.reset()
    llm.push(tool_reply(("save_note", {"text": "buy milk"})))
    done = await sdk(url, "alice").chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": "@agent note that I must buy milk"}]
    )
    text = done.choices[0].message.content or ""
    assert "save_note" in text and "approval" in text and "Not run" in text
    assert done.model_extra is not None and done.model_extra["pending_approval"][0]["name"] == "save_note"
    assert await PostgresRecords(database_url).notes(workspace, "alice") == []
    assert not [row for row in logged(database_url, workspace) if "buy milk" in row[1]]


async def check_retrieval(url: str, llm, workspace: str) -> None:
    """A chat-mode workspace's documents are retrieved as in any turn; the sources come beside ``choices``.

    (In ``automatic`` mode a model that calls tools searches them itself, through ``search_documents``.)
    """
    workspace = f"{workspace}-docs"
    await make_workspace(url, "alice", workspace, chat_mode="chat", similarity_threshold=0.0)
    alice = get_client(url=url, api_key=KEYS["alice"])
    out = await alice.runs.wait(
        None, "ingest", input={"paths": [str(SAMPLE)]}, context={"workspace": workspace}
    )
    assert [a["title"] for a in out["added"]] == ["faq.md"], out  # type: ignore[index]
    question = "How long are check results kept before they are deleted?"
    llm.reset()
    llm.push(text_reply("90 days."), text_reply("90 days, nightly."))
    done = await sdk(url, "alice").chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": question}]
    )
    assert "older than 90 days" in str(llm.requests[-1]["messages"])
    sources = done.model_extra["sources"]  # type: ignore[index]
    assert sources and {s["title"] for s in sources} == {"faq.md"}
    stream = await sdk(url, "alice").chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": question}], stream=True
    )
    finish = [c async for c in stream if c.choices and c.choices[0].finish_reason]
    assert {s["title"] for s in finish[0].model_extra["sources"]} == {"faq.md"}  # type: ignore[index]


async def check_leaving(url: str, llm, workspace: str, database_url: str) -> None:
    """The run of a stream whose client went away is cancelled: nothing reaches the chat log."""
    workspace = f"{workspace}-left"
    await make_workspace(url, "alice", workspace)
    llm.reset()
    llm.push({**text_reply("too late"), "delay": 4})
    headers = {"Authorization": f"Bearer {KEYS['alice']}"}
    body = {"model": workspace, "stream": True, "messages": [{"role": "user", "content": "take your time"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as r:
            assert r.status_code == 200
            lines = r.aiter_lines()  # held open: a finished iterator would close the connection now
            assert (await anext(lines)).startswith("data: ")  # the role chunk
            for _ in range(100):  # leave once the model has the request: the turn is running
                if llm.requests:
                    break
                await asyncio.sleep(0.1)
            assert llm.requests
    await until_settled(url, KEYS["alice"], {"via": "openai-api"}, gone=True)
    assert logged(database_url, workspace) == []
    alice = get_client(url=url, api_key=KEYS["alice"])
    assert await alice.threads.search(metadata={"via": "openai-api"}) == []


async def test_v1_under_langgraph_dev(secured_server, llm, workspace, database_url):  # noqa: F811
    await check_chat_and_models(secured_server, llm, workspace, database_url)
    await check_embeddings(secured_server, workspace)
    await check_refusals(secured_server, workspace)
    await check_agent_approval(secured_server, llm, workspace, database_url)
    await check_retrieval(secured_server, llm, workspace)
    await check_leaving(secured_server, llm, workspace, database_url)


async def test_v1_under_make_serve(keyed_served_url, llm, workspace, database_url):  # noqa: F811
    url = keyed_served_url
    await check_chat_and_models(url, llm, workspace, database_url)
    await check_embeddings(url, workspace)
    await check_refusals(url, workspace)
    await check_agent_approval(url, llm, workspace, database_url)
    await check_retrieval(url, llm, workspace)
    await check_leaving(url, llm, workspace, database_url)


async def test_query_mode_refuses_without_context(dev_server, llm):
    """Without keys everyone is the local user; a query-mode workspace with no documents refuses, unasked."""
    workspace = f"ws-{uuid.uuid4().hex[:8]}"
    client = get_client(url=dev_server)
    await client.assistants.create("agent", context={"workspace": workspace, "chat_mode": "query"})
    llm.reset()
    done = await sdk(dev_server, key="anything").chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": "What does the contract say?"}]
    )
    assert "no relevant information" in (done.choices[0].message.content or "").lower()
    assert llm.requests == [], [r["messages"] for r in llm.requests]
