"""Shared workspaces, attacked: what bob's client can send through ``langgraph_sdk`` to reach more of alice's.

Each test is a request of bob's to the ``langgraph dev`` holding both users' keys, as a stranger or as a
member who would be a manager: adding himself, promoting himself, an assistant of his own naming her
workspace, a loosened approval, ingest and the document-writing tool, a schedule, a resumed approval
after his removal, and names that are not a workspace's.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client

from tests.security.conftest import KEYS
from tests.security.test_workspaces import SAMPLE, alice_has_the_secret
from tests.support.helpers import user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.members import unknown_message
from workspace_agent.core.context import document_scope
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def as_user(url: str, name: str):
    return get_client(url=url, api_key=KEYS[name])


async def status_of(call) -> tuple[int, str]:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    return caught.value.response.status_code, caught.value.response.text


async def alices_titles(workspace: str) -> list[str]:
    return sorted(d.title for d in await DocumentStore().list_documents(document_scope("alice", workspace)))


@pytest.fixture
async def shared(secured_server, llm, workspace) -> str:
    """Alice's workspace with her ledger in it, shared with bob as a member."""
    await alice_has_the_secret(secured_server, llm, workspace)
    alice = as_user(secured_server, "alice")
    await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "member"})
    return f"alice/{workspace}"


async def test_a_stranger_cannot_add_himself(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)
    bob = as_user(secured_server, "bob")
    ref = f"alice/{workspace}"
    for call in (
        bob.http.put(f"/workspaces/{ref}/members/bob", json={"role": "manager"}),
        bob.http.put(f"/workspaces/{ref}/settings", json={"system_prompt": "mine"}),
        bob.http.get(f"/workspaces/{ref}/settings"),
        bob.http.delete(f"/workspaces/{ref}/members/alice"),
    ):
        status, said = await status_of(call)
        assert status == 404 and unknown_message(ref) in said
    listed = (await bob.http.get("/workspaces/shared"))["workspaces"]
    assert ref not in [w["workspace"] for w in listed], "other tests share with bob; not this one"


async def test_a_member_cannot_promote_himself_change_settings_or_remove_others(secured_server, shared):
    bob = as_user(secured_server, "bob")
    assert (await status_of(bob.http.put(f"/workspaces/{shared}/members/bob", json={"role": "manager"})))[
        0
    ] == 403
    assert (await status_of(bob.http.put(f"/workspaces/{shared}/members/eve", json={"role": "member"})))[
        0
    ] == 403
    assert (await status_of(bob.http.put(f"/workspaces/{shared}/settings", json={"top_n": 50})))[0] == 403
    assert (await status_of(bob.http.delete(f"/workspaces/{shared}/members/bob")))[0] == 403
    alice = as_user(secured_server, "alice")
    listed = await alice.http.get(f"/workspaces/{shared.split('/')[1]}/members")
    assert listed["members"] == [{"user": "bob", "role": "member", "added_by": "alice"}]


async def test_an_assistant_of_his_cannot_name_her_workspace(secured_server, shared):
    """His assistant's settings would stand in for hers; a member names the workspace in a run's context."""
    bob = as_user(secured_server, "bob")
    status, said = await status_of(
        bob.assistants.create("agent", context={"workspace": shared, "auto_approved": ["save_to_workspace"]})
    )
    assert status == 403 and "own workspace" in said


async def test_a_member_cannot_loosen_approval_or_widen_tools_in_a_run(secured_server, shared):
    bob = as_user(secured_server, "bob")
    thread = await bob.threads.create()
    for loosened in ({"auto_approved": ["save_to_workspace"]}, {"tools": ["*"]}, {"user_id": "alice"}):
        status, _ = await status_of(
            bob.runs.wait(
                thread["thread_id"],
                "agent",
                input=user_message("hi"),
                context={"workspace": shared, **loosened},
            )
        )
        assert status == 403, loosened


async def test_a_member_run_carries_the_published_settings_but_no_wider_ones(secured_server, llm, shared):
    """What a saved job carries (the workspace's settings as published) passes; anything wider is refused.

    A wider ``auto_approved`` or ``tools`` reads as settings older than the published ones, in a run and in a
    schedule alike, and no model is called.
    """
    bob = as_user(secured_server, "bob")
    published = (await bob.http.get(f"/workspaces/{shared}/settings"))["settings"]
    carried = {**published, "workspace": shared}
    thread = (await bob.threads.create())["thread_id"]
    llm.push(text_reply("carried"))
    out = await bob.runs.wait(thread, "agent", input=user_message("hi"), context=carried)
    assert out["messages"][-1]["content"] == "carried"

    start = len(llm.requests)
    wider = [
        {**carried, "auto_approved": [*published["auto_approved"], "save_to_workspace"]},
        {**carried, "tools": ["*"]},
    ]
    for context in wider:
        run = bob.runs.wait(thread, "agent", input=user_message("hi"), context=context)
        status, said = await status_of(run)
        assert status == 403 and "changed the shared settings" in said, said
        status, said = await status_of(
            bob.crons.create("agent", schedule="0 9 * * *", input=user_message("hi"), context=context)
        )
        assert status == 403 and "changed the shared settings" in said, said
    assert len(llm.requests) == start
    assert await bob.crons.search() == []


async def test_a_member_cannot_ingest_into_her_workspace(secured_server, shared):
    bob = as_user(secured_server, "bob")
    before = await alices_titles(shared.split("/")[1])
    with pytest.raises(Exception, match=r"NotAllowed: you are a member of .*its owner and managers"):
        await bob.runs.wait(None, "ingest", input={"paths": [str(SAMPLE)]}, context={"workspace": shared})
    assert await alices_titles(shared.split("/")[1]) == before


async def test_a_member_is_not_offered_save_to_workspace_and_cannot_run_it(secured_server, llm, shared):
    bob = as_user(secured_server, "bob")
    before = await alices_titles(shared.split("/")[1])
    thread = await bob.threads.create()
    llm.push(tool_reply(("save_to_workspace", {"text": "forged", "title": "forged"})), text_reply("done"))
    start = len(llm.requests)
    await bob.runs.wait(
        thread["thread_id"],
        "agent",
        input=user_message("@agent save 'forged'"),
        context={"workspace": shared},
    )
    offered = {t["function"]["name"] for t in llm.requests[start].get("tools", [])}
    assert "search_documents" in offered and "save_to_workspace" not in offered
    state = await bob.threads.get_state(thread["thread_id"])
    if state["next"]:  # an approval card for a tool he was never offered: approving it runs nothing
        await bob.runs.wait(
            thread["thread_id"],
            "agent",
            command={"resume": {"decisions": [{"type": "approve"}]}},
            context={"workspace": shared},
        )
    assert await alices_titles(shared.split("/")[1]) == before


async def test_a_schedule_in_her_workspace_needs_membership(secured_server, llm, workspace):
    await alice_has_the_secret(secured_server, llm, workspace)
    bob = as_user(secured_server, "bob")
    ref = f"alice/{workspace}"
    status, said = await status_of(
        bob.crons.create(
            "agent",
            schedule="0 9 * * *",
            input=user_message("report"),
            context={"workspace": ref, "user_id": "bob"},
        )
    )
    assert status == 404 and unknown_message(ref) in said


async def test_a_removed_member_cannot_resume_a_waiting_approval_in_her_workspace(
    secured_server, llm, shared
):
    bob, alice = as_user(secured_server, "bob"), as_user(secured_server, "alice")
    thread = await bob.threads.create()
    llm.push(tool_reply(("save_note", {"text": "the code is 7315"})))
    await bob.runs.wait(
        thread["thread_id"],
        "agent",
        input=user_message("@agent note the code"),
        context={"workspace": shared},
    )
    assert (await bob.threads.get_state(thread["thread_id"]))["next"] == ["approve"]
    await alice.http.delete(f"/workspaces/{shared.split('/')[1]}/members/bob")
    status, said = await status_of(
        bob.runs.wait(
            thread["thread_id"],
            "agent",
            command={"resume": {"decisions": [{"type": "approve"}]}},
            context={"workspace": shared},
        )
    )
    assert status == 404 and unknown_message(shared) in said
    assert (await bob.threads.get_state(thread["thread_id"]))["next"] == ["approve"], "nothing ran"


@pytest.mark.parametrize("ref", ["alice/.hidden", "alice//x", "alice/x y", "/x", "alice/"])
async def test_names_that_are_no_workspace_are_refused_as_unknown(secured_server, ref):
    bob = as_user(secured_server, "bob")
    status, _ = await status_of(bob.http.get(f"/workspaces/{ref}/members"))
    assert status == 404
