"""Issue 22: the memory and ingest graphs check their context as the agent's does, naming the field.

Before, ``min_chats=True`` passed as 1 and ``chunk_size="1000"`` failed with a ``TypeError`` deep in a
comparison. Now a run whose context has a field of the wrong type is refused before any node runs.
"""

from __future__ import annotations

import pytest

from tests.integration.test_memory import marks, seed, user_of
from workspace_agent.checkpoints.memories import PostgresMemories
from workspace_agent.core.context import ContextError
from workspace_agent.graphs.ingest import build_graph as build_ingest
from workspace_agent.graphs.memory import build_graph as build_memory


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [("min_chats", True, "must be a whole number"), ("idle_minutes", "0", "must be a number")],
)
async def test_a_wrong_typed_memory_setting_stops_the_run_before_a_chat_is_read(
    llm, database_url, workspace, name, value, says
):
    await seed(database_url, workspace, 6)
    graph = build_memory(memories=PostgresMemories(database_url))
    context = {"workspace": workspace, "user_id": user_of(workspace), "idle_minutes": 0, name: value}
    with pytest.raises(ContextError) as refused:
        await graph.ainvoke({}, context=context)
    assert f"context field '{name}'" in str(refused.value) and says in str(refused.value)
    assert llm.requests == [] and not any((await marks(database_url, workspace)).values())


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [("chunk_size", "1000", "must be a whole number"), ("batch_size", True, "must be a whole number")],
)
async def test_a_wrong_typed_ingest_setting_stops_the_run_before_a_file_is_read(
    llm, tmp_path, workspace, name, value, says
):
    (tmp_path / "notes.txt").write_text("a note")
    graph = build_ingest(document_roots=[tmp_path])
    with pytest.raises(ContextError) as refused:
        await graph.ainvoke({"paths": [str(tmp_path)]}, context={"workspace": workspace, name: value})
    assert f"context field '{name}'" in str(refused.value) and says in str(refused.value)
    assert llm.requests == [], "no embedding was asked for"
