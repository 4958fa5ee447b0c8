"""Issue 40, finding 10: ``assistants.update`` stored a context with ``auto_approved: "*"`` (a string).

``on_assistant_write`` checked an assistant's context by the agent graph's ``Context`` only when the request
named ``graph_id == "agent"``, which a create does and an update does not; every run of the assistant was
then refused. Now the context is checked by its graph's schema on update too (every graph's, when the update
names none), so the wrong value is refused where it is written. The auth handlers run whether or not keys
are configured (``langgraph.json`` always names them), so the keyless ``dev_server`` refuses it as well.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.security.conftest import KEYS
from workspace_agent.samples.scripted_model import ScriptedLLM

WRONG = [
    ({"auto_approved": "*"}, "auto_approved"),
    ({"approval_required": "*"}, "approval_required"),
    ({"history_limit": "20"}, "history_limit"),
    ({"memories_enabled": "no"}, "memories_enabled"),
    ({"no_such_setting": 1}, "no_such_setting"),
]


@pytest.fixture(params=["secured", "keyless"])
async def owner(request: pytest.FixtureRequest, workspace: str) -> AsyncIterator[tuple[LangGraphClient, str]]:
    """A client and one of its assistants, on the keyed server (as alice) and on the keyless one.

    The keyless server keeps its assistants across sessions, so the assistant has its own workspace slug
    (a wrong value stored by the code before is no ``default`` workspace of later tests) and is deleted.
    """
    if request.param == "secured":
        client = get_client(url=request.getfixturevalue("secured_server"), api_key=KEYS["alice"])
    else:
        client = get_client(url=request.getfixturevalue("dev_server"), api_key=None)
    made = await client.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    try:
        yield client, str(made["assistant_id"])
    finally:
        await client.assistants.delete(made["assistant_id"])


@pytest.mark.parametrize(("context", "field"), WRONG, ids=[field for _, field in WRONG])
async def test_a_wrongly_typed_update_is_refused_when_stored(
    owner: tuple[LangGraphClient, str], workspace: str, context: dict, field: str
) -> None:
    client, assistant_id = owner
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.assistants.update(assistant_id, context={"workspace": workspace, **context})
    assert refused.value.response.status_code == 422, refused.value.response.text
    assert field in refused.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.assistants.update(
            assistant_id, config={"configurable": {"workspace": workspace, **context}}
        )
    assert refused.value.response.status_code == 422 and field in refused.value.response.text
    kept = await client.assistants.get(assistant_id)
    assert kept["context"] == {"workspace": workspace}, "the stored context is the one before"


async def test_a_well_typed_update_is_stored_and_runs(
    owner: tuple[LangGraphClient, str], workspace: str, llm: ScriptedLLM
) -> None:
    client, assistant_id = owner
    good = {"workspace": workspace, "auto_approved": ["*"], "history_limit": 5}
    updated = await client.assistants.update(assistant_id, context=good)
    assert updated["context"] == good
    renamed = await client.assistants.update(assistant_id, name="renamed")  # no context: nothing to check
    assert renamed["context"] == good
    thread = await client.threads.create()
    try:
        done = await client.runs.wait(
            thread["thread_id"], assistant_id, input={"messages": [{"role": "user", "content": "hello"}]}
        )
        assert isinstance(done, dict) and "hello" in str(done["messages"][-1]["content"])
    finally:
        await client.threads.delete(thread["thread_id"])


async def test_other_graphs_are_checked_by_their_own_schema(owner: tuple[LangGraphClient, str]) -> None:
    """A memory assistant takes the memory graph's settings (not the agent's) and refuses wrong ones."""
    client, _ = owner
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.assistants.create("memory", context={"min_chats": "3"})
    assert refused.value.response.status_code == 422 and "min_chats" in refused.value.response.text
    made = await client.assistants.create("memory", context={"min_chats": 3})
    try:
        updated = await client.assistants.update(made["assistant_id"], context={"min_chats": 4})
        assert updated["context"] == {"min_chats": 4}, "an update naming no graph may suit another graph"
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.assistants.update(made["assistant_id"], context={"min_chats": "4"})
        assert refused.value.response.status_code == 422
    finally:
        await client.assistants.delete(made["assistant_id"])
