"""Issue 40, finding 5: a valid key sent as ``x-api-key`` was a 500 on every ``/v1`` and ``/api/v1`` route.

``x-api-key`` is the header ``langgraph_sdk`` itself sends and the one the 401 names, but the routes passed
it on to ``langgraph_sdk.get_client(headers=...)``, which refuses it as reserved. Here alice sends her key
in that header alone, to every route of both APIs (raw HTTP and the ``openai`` SDK), and through
``langgraph_sdk`` to the server's own API: every request is answered, none is a 500.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS
from workspace_agent.samples.scripted_model import ScriptedLLM


@pytest.fixture
async def alices(secured_server: str, workspace: str) -> AsyncIterator[str]:
    """A workspace of alice's, made through ``langgraph_sdk`` (which sends her key as ``x-api-key``)."""
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    made = await client.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    yield workspace
    await client.assistants.delete(made["assistant_id"])


async def test_langgraph_sdk_key_reaches_the_servers_own_api(secured_server: str, alices: str) -> None:
    """The SDK's own way (``api_key=``, sent as ``x-api-key``) is alice on the server's API."""
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    found = await client.assistants.search(graph_id="agent", limit=100)
    assert alices in {(a.get("context") or {}).get("workspace") for a in found}
    thread = await client.threads.create()
    assert thread["metadata"].get("owner") == "alice"
    await client.threads.delete(thread["thread_id"])


def route_requests(workspace: str) -> list[tuple[str, str, dict]]:
    """One request to every route of both APIs: method, path and ``httpx`` arguments."""
    ws = f"/api/v1/workspace/{workspace}"
    chat = {"model": workspace, "messages": [{"role": "user", "content": "hello"}]}
    return [
        ("GET", "/v1/models", {}),
        ("POST", "/v1/chat/completions", {"json": chat}),
        ("POST", "/v1/chat/completions", {"json": {**chat, "stream": True}}),
        ("POST", "/v1/embeddings", {"json": {"model": workspace, "input": "hello"}}),
        ("GET", "/api/v1/workspaces", {}),
        ("POST", f"{ws}/chat", {"json": {"message": "hello", "sessionId": "key-header"}}),
        ("POST", f"{ws}/stream-chat", {"json": {"message": "hello", "sessionId": "key-header"}}),
        ("GET", f"{ws}/chats", {"params": {"apiSessionId": "key-header"}}),
        ("POST", f"{ws}/thread/new", {"json": {"slug": "by-header"}}),
        ("POST", f"{ws}/thread/by-header/chat", {"json": {"message": "hello"}}),
        ("POST", f"{ws}/thread/by-header/stream-chat", {"json": {"message": "hello"}}),
        ("GET", f"{ws}/thread/by-header/chats", {}),
        ("POST", f"{ws}/vector-search", {"json": {"query": "hello"}}),
        (
            "POST",
            "/api/v1/document/upload",
            {
                "files": {"file": ("hello.txt", b"hello", "text/plain")},
                "data": {"addToWorkspaces": workspace},
            },
        ),
    ]


async def test_every_route_takes_the_key_as_x_api_key(
    secured_server: str, alices: str, llm: ScriptedLLM
) -> None:
    headers = {"x-api-key": KEYS["alice"]}
    async with httpx.AsyncClient(base_url=secured_server, headers=headers, timeout=120) as client:
        for method, path, arguments in route_requests(alices):
            response = await client.request(method, path, **arguments)
            assert response.status_code == 200, (method, path, response.status_code, response.text[:300])
        listed = (await client.get("/v1/models")).json()["data"]
        assert alices in {m["id"] for m in listed} and {m["owned_by"] for m in listed} == {"alice"}
        wrong = await client.get("/v1/models", headers={"x-api-key": "guess"})
        assert wrong.status_code == 401, wrong.text
        wrong = await client.get("/api/v1/workspaces", headers={"x-api-key": "guess"})
        assert wrong.status_code == 403 and wrong.json() == {"error": "No valid api key found."}, wrong.text


async def test_openai_sdk_with_the_key_in_x_api_key(
    secured_server: str, alices: str, llm: ScriptedLLM
) -> None:
    """A client that puts the key in ``x-api-key`` (the server's documented header) is alice.

    The ``openai`` SDK sends its ``api_key`` as ``Authorization: Bearer``; with the key in ``x-api-key`` as
    well, the bearer may be anything, as for the server's own API.
    """
    for bearer in ("not-a-key", KEYS["alice"]):
        sdk = openai.AsyncOpenAI(
            base_url=f"{secured_server}/v1",
            api_key=bearer,
            default_headers={"x-api-key": KEYS["alice"]},
            max_retries=0,
        )
        assert alices in {m.id async for m in sdk.models.list()}
        done = await sdk.chat.completions.create(
            model=alices, messages=[{"role": "user", "content": "hello"}]
        )
        assert "hello" in (done.choices[0].message.content or "")
        embedded = await sdk.embeddings.create(model=alices, input="hello")
        assert embedded.data and len(embedded.data[0].embedding) > 0
