"""Issue 19 item 1: with API keys on, a workspace belongs to its user; naming another's reaches nothing of it.

Each user has a namespace of workspaces (``document_scope``): bob naming alice's workspace gets a workspace of
that name of his own. Every attack here is a request bob's client can send through ``langgraph_sdk`` to the
``langgraph dev`` holding both users' keys; before the namespace, each one reached alice's documents.
"""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS
from tests.serving.conftest import serve, serving_env  # noqa: F401 - fixtures of the Aegra tests
from tests.support.helpers import user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import QUERY_REFUSAL, document_scope
from workspace_agent.samples.scripted_model import text_reply, tool_reply

SECRET = "The vault code of the north office is 7315."
QUESTION = "What is the vault code of the north office?"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "workspace" / "faq.md"


def as_user(url: str, name: str):
    return get_client(url=url, api_key=KEYS[name])


def text_file(name: str, text: str) -> dict:
    """A plain-text file block, as Agent Chat UI sent it before late 2025 (``source_type``)."""
    data = base64.b64encode(text.encode()).decode()
    return {
        "type": "file",
        "source_type": "base64",
        "mime_type": "text/plain",
        "data": data,
        "metadata": {"filename": name},
    }


async def turn(client, llm, workspace: str, content, *, mode: str = "query", reply: str = "ok") -> dict:
    thread = await client.threads.create()
    llm.push(text_reply(reply))
    return await client.runs.wait(
        thread["thread_id"],
        "agent",
        input=user_message(content),
        context={"workspace": workspace, "chat_mode": mode},
    )


def prompts_since(llm, start: int) -> str:
    return "\n".join(str(m.get("content")) for r in llm.requests[start:] for m in r["messages"])


async def alice_has_the_secret(url: str, llm, workspace: str) -> dict:
    """Alice drops her ledger into her workspace and is answered from it (the control: retrieval works)."""
    alice = as_user(url, "alice")
    start = len(llm.requests)
    out = await turn(
        alice, llm, workspace, [{"type": "text", "text": QUESTION}, text_file("ledger.txt", SECRET)]
    )
    assert [u["outcome"] for u in out["uploads"]] == ["added"]
    assert "7315" in prompts_since(llm, start)
    return out


async def test_bob_naming_alices_workspace_reads_none_of_her_documents(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)
    bob = as_user(secured_server, "bob")

    start = len(llm.requests)
    out = await turn(bob, llm, workspace, QUESTION)
    assert out["messages"][-1]["content"] == QUERY_REFUSAL
    assert not out.get("sources")
    assert "7315" not in prompts_since(llm, start)

    # and he cannot tell her workspace from one nobody has: the same answer, the same decisions
    other = f"{workspace}-nobody"
    elsewhere = await turn(bob, llm, other, QUESTION)

    def seen(state: dict, name: str) -> list:
        return [(d["id"], d["outcome"], d["why"].replace(name, "<ws>")) for d in state["decisions"]]

    assert elsewhere["messages"][-1]["content"] == out["messages"][-1]["content"]
    assert seen(elsewhere, other) == seen(out, workspace)


async def test_bob_uploading_a_file_of_the_same_name_does_not_replace_alices(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)
    bob = as_user(secured_server, "bob")
    forged = "The vault code of the north office is 0000."
    out = await turn(
        bob, llm, workspace, [{"type": "text", "text": QUESTION}, text_file("ledger.txt", forged)]
    )
    assert [u["outcome"] for u in out["uploads"]] == ["added"], "a new document of bob's, not a replacement"

    alice = as_user(secured_server, "alice")
    start = len(llm.requests)
    again = await turn(alice, llm, workspace, QUESTION)
    prompt = prompts_since(llm, start)
    assert "7315" in prompt and "0000" not in prompt
    assert all("0000" not in s["text"] for s in again["sources"])
    [doc] = await DocumentStore().list_documents(document_scope("alice", workspace))
    assert doc.title == "ledger.txt"


async def test_bob_cannot_ingest_into_alices_workspace(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)
    store = DocumentStore()
    before = [d.id for d in await store.list_documents(document_scope("alice", workspace))]

    bob = as_user(secured_server, "bob")
    with pytest.raises(httpx.HTTPStatusError) as posing:
        await bob.runs.wait(
            None,
            "ingest",
            input={"paths": [str(SAMPLE)]},
            context={"workspace": workspace, "user_id": "alice"},
        )
    assert posing.value.response.status_code == 403
    out = await bob.runs.wait(
        None, "ingest", input={"paths": [str(SAMPLE)]}, context={"workspace": workspace}
    )
    assert [a["title"] for a in out["added"]] == ["faq.md"]
    assert [d.id for d in await store.list_documents(document_scope("alice", workspace))] == before
    assert [d.title for d in await store.list_documents(document_scope("bob", workspace))] == ["faq.md"]


async def test_bobs_document_tools_search_his_own_workspace(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)

    async def search_as(name: str) -> str:
        client = as_user(secured_server, name)
        thread = await client.threads.create()
        llm.push(tool_reply(("search_documents", {"query": QUESTION})), text_reply("done"))
        out = await client.runs.wait(
            thread["thread_id"],
            "agent",
            input=user_message(f"@agent {QUESTION}"),
            context={"workspace": workspace, "chat_mode": "chat"},
        )
        [result] = [m for m in out["messages"] if m["type"] == "tool"]
        return str(result["content"])

    assert "7315" in await search_as("alice"), "the control: alice's own search finds her ledger"
    assert "7315" not in await search_as("bob")


async def test_under_aegra_too(serve, llm, workspace):  # noqa: F811 - the fixture
    """``make serve`` runs the same handler and graphs: bob's run is his, so is the workspace he names."""
    url = serve(WORKSPACE_AGENT_API_KEYS=",".join(f"{key}:{user}" for user, key in KEYS.items())).urls[0]
    await alice_has_the_secret(url, llm, workspace)
    bob = as_user(url, "bob")
    start = len(llm.requests)
    out = await turn(bob, llm, workspace, QUESTION)
    assert out["messages"][-1]["content"] == QUERY_REFUSAL
    assert "7315" not in prompts_since(llm, start)
    await bob.runs.wait(None, "ingest", input={"paths": [str(SAMPLE)]}, context={"workspace": workspace})
    titles = [d.title for d in await DocumentStore().list_documents(document_scope("alice", workspace))]
    assert titles == ["ledger.txt"]
