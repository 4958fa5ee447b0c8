"""Shared workspaces below the server: names, the member check and the graphs' own refusals.

The server checks a run's workspace when it arrives; the graphs check it again at their first step, which
is what holds for a scheduled run the engine fires by itself and for a program that compiles the graph.
"""

from __future__ import annotations

import pytest

from tests.support.helpers import user_message
from workspace_agent.checkpoints.members import Members, NotAllowed, WorkspaceUnknown, require
from workspace_agent.core.context import Context, ContextError, IngestContext, document_scope, workspace_owner
from workspace_agent.graphs.agent import build_graph
from workspace_agent.graphs.ingest import build_graph as build_ingest_graph
from workspace_agent.samples.scripted_model import text_reply


def test_a_workspace_is_named_by_its_slug_or_as_owner_slug():
    assert Context(workspace="alice/handbook").workspace == "alice/handbook"
    for bad in ("alice/", "/handbook", "a/b/c", "alice bob/handbook", "alice/.hidden"):
        with pytest.raises(ContextError, match="owner/slug"):
            Context(workspace=bad)
    assert workspace_owner("bob", "alice/handbook") == ("alice", "handbook")
    assert workspace_owner("bob", "handbook") == ("bob", "handbook")
    assert document_scope("bob", "alice/handbook") == document_scope("alice", "handbook") == "alice/handbook"
    assert (
        document_scope("default", "default/handbook") == document_scope("default", "handbook") == "handbook"
    )


async def test_roles_decide_what_a_member_may_do(database_url, workspace):
    members = Members()
    ref = f"alice/{workspace}"
    with pytest.raises(WorkspaceUnknown) as stranger:
        await require("bob", ref)
    with pytest.raises(WorkspaceUnknown) as nobody:
        await require("bob", f"{ref}-none")
    assert str(stranger.value).replace(ref, "<ws>") == str(nobody.value).replace(f"{ref}-none", "<ws>")

    assert await members.put("alice", workspace, "bob", "member", by="alice") is True
    assert (await require("bob", ref)).role == "member"
    for need in ("write", "manage"):
        with pytest.raises(NotAllowed, match="owner and managers"):
            await require("bob", ref, need)
    assert await members.put("alice", workspace, "bob", "manager", by="alice") is False, "a change of role"
    assert (await require("bob", ref, "manage")).role == "manager"
    assert [(m.member, m.role) for m in await members.shared_with("bob") if m.workspace == workspace] == [
        ("bob", "manager")
    ]
    assert await members.remove("alice", workspace, "bob") is True
    with pytest.raises(WorkspaceUnknown):
        await require("bob", ref)
    assert (await require("alice", workspace, "manage")).role == "owner", "her own, no row needed"


async def test_the_agent_graph_refuses_a_workspace_not_shared_with_its_user(saver, llm, workspace, thread):
    """What stops a job's run fired by the engine after its member was removed: the graph's first step."""
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("never"))
    context = Context(workspace=f"alice/{workspace}", user_id="bob")
    with pytest.raises(WorkspaceUnknown):
        await graph.ainvoke(user_message("hello"), thread, context=context)
    assert llm.requests == [], "refused before any model call"

    await Members().put("alice", workspace, "bob", "member", by="alice")
    out = await graph.ainvoke(user_message("hello"), thread, context=context)
    assert out["messages"][-1].content == "never"


async def test_the_ingest_graph_takes_documents_from_managers_only(saver, llm, workspace, tmp_path):
    graph = build_ingest_graph(checkpointer=saver, document_roots=[tmp_path])
    (tmp_path / "rota.md").write_text("# Rota\n\nThe north office opens at eight.")
    await Members().put("alice", workspace, "bob", "member", by="alice")
    context = IngestContext(workspace=f"alice/{workspace}", user_id="bob")
    config = {"configurable": {"thread_id": f"ingest-{workspace}"}}
    with pytest.raises(NotAllowed):
        await graph.ainvoke({"paths": [str(tmp_path / "rota.md")]}, config, context=context)

    await Members().put("alice", workspace, "bob", "manager", by="alice")
    config = {"configurable": {"thread_id": f"ingest-{workspace}-2"}}
    out = await graph.ainvoke({"paths": [str(tmp_path / "rota.md")]}, config, context=context)
    assert [a["title"] for a in out["added"]] == ["rota.md"]
