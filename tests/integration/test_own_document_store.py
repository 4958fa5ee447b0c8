"""A program's own document store reaches every part of a turn that reads or writes documents.

``build_graph(documents=...)`` is how a program keeps its documents elsewhere (another database, another
scope). The store here keeps every workspace under a key of its own, so whatever it holds is invisible to
the default store: a tool or node that fell back to a fresh ``DocumentStore()`` would find nothing, or
write where the program never looks.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.helpers import user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.documents import index_document
from workspace_agent.skills.loaders import content_hash

PREFIX = "own-store:"
PRICING = "# Pricing\n\nThe starter plan costs 12 euros a month; the team plan costs 40."
#: The store's methods that name a workspace first.
WORKSPACE_METHODS = (
    "space",
    "check_space",
    "get_document",
    "store_document",
    "list_documents",
    "openings",
    "pinned_documents",
    "documents_with_content",
    "remove_documents",
    "set_pinned",
    "search",
)


def _own_key(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def call(self: OwnStore, workspace: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(method.__name__)
        key = workspace if workspace.startswith(PREFIX) else PREFIX + workspace  # check_space calls space
        return await method(self, key, *args, **kwargs)

    return call


class OwnStore(DocumentStore):
    """The project's tables, every workspace under a key of its own; it records which methods ran."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []


for _name in WORKSPACE_METHODS:
    setattr(OwnStore, _name, _own_key(getattr(DocumentStore, _name)))


@pytest.fixture
def embed(monkeypatch, llm):
    """Embeddings at the scripted server, so documents can be indexed and searched."""
    monkeypatch.setenv("EMBEDDING_MODEL", "scripted-embed")
    return llm


def tool_results(out: dict) -> dict[str, str]:
    """Each tool's answer in the turn, by tool name."""
    names = {c["id"]: c["name"] for m in out["messages"] if m.type == "ai" for c in m.tool_calls}
    return {names[m.tool_call_id]: str(m.content) for m in out["messages"] if m.type == "tool"}


async def test_the_graphs_own_store_serves_every_document_tool_and_node(embed, saver, workspace, thread):
    store = OwnStore()
    text = PRICING
    await index_document(
        store, workspace, source="/docs/pricing.md", title="pricing.md", text=text, digest=content_hash(b"p")
    )
    assert await DocumentStore().list_documents(workspace) == [], "the default store cannot see it"
    graph = build_graph(checkpointer=saver, documents=store)
    context = Context(workspace=workspace, auto_approved=["*"], similarity_threshold=0.0)

    embed.push(
        tool_reply(
            ("search_documents", {"query": "starter plan pricing"}),
            ("list_documents", {}),
            ("summarize_document", {"name": "pricing.md"}),
            ("save_to_workspace", {"text": "The harbour opens at six.", "title": "harbour note"}),
        ),
        text_reply("done"),
    )
    out = await graph.ainvoke(user_message("@agent what do the documents say?"), thread, context=context)
    results = tool_results(out)
    assert "12 euros a month" in results["search_documents"], results
    assert "pricing.md" in results["list_documents"], results
    assert "pricing.md is short enough to read whole" in results["summarize_document"], results
    assert "Saved 'harbour note'" in results["save_to_workspace"], results
    assert {"search", "list_documents", "openings", "documents_with_content", "store_document"} <= set(
        store.calls
    )

    # a file dropped into a chat turn joins the program's store, and retrieval reads it from there
    store.calls.clear()
    upload = {
        "type": "file",
        "source_type": "base64",
        "mime_type": "text/plain",
        "data": base64.b64encode(b"The ferry leaves at nine.").decode(),
        "metadata": {"filename": "ferry.txt"},
    }
    embed.push(text_reply("at nine"))
    blocks = [{"type": "text", "text": "When does the ferry leave?"}, upload]
    chat = Context(workspace=workspace, chat_mode="chat", similarity_threshold=0.0)
    out = await graph.ainvoke(user_message(blocks), thread, context=chat)
    assert [(u["name"], u["outcome"]) for u in out["uploads"]] == [("ferry.txt", "added")]
    assert any(s["title"] == "ferry.txt" for s in out["sources"]), out["sources"]
    assert {"store_document", "space", "documents_with_content"} <= set(store.calls), store.calls

    titles = {d.title for d in await store.list_documents(workspace)}
    assert titles == {"pricing.md", "harbour note", "ferry.txt"}
    assert await DocumentStore().list_documents(workspace) == [], "nothing went to the default store"
