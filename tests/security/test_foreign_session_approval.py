"""Issue 40, finding 9: approving another user's waiting call by its ``sessionId`` on ``/api/v1`` was a 500.

Bob cannot see alice's conversation, so the route took his decisions for the start of a conversation of his
own: it made him a new thread and resumed it, which failed on the server. Decisions now never start a
conversation: another user's session is unknown (404), like another user's thread slug, and a conversation
that waits for nothing is a 409. Nothing runs, and alice's call still waits for her.
"""

from __future__ import annotations

import httpx
from langgraph_sdk import get_client

from tests.security.conftest import KEYS
from workspace_agent.samples.scripted_model import ScriptedLLM, text_reply, tool_reply


def api(url: str, user: str) -> httpx.AsyncClient:
    """A user's client of ``/api/v1``, with the key as AnythingLLM's clients send it."""
    return httpx.AsyncClient(
        base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {KEYS[user]}"}, timeout=120
    )


async def test_bob_approving_alices_session_is_404_and_nothing_runs(
    secured_server: str, llm: ScriptedLLM, workspace: str
) -> None:
    for user in ("alice", "bob"):  # each has a workspace of that slug: bob's is his own
        await get_client(url=secured_server, api_key=KEYS[user]).assistants.create(
            "agent", context={"workspace": workspace}
        )
    chat = f"/workspace/{workspace}/chat"
    async with api(secured_server, "alice") as alice, api(secured_server, "bob") as bob:
        llm.push(tool_reply(("save_note", {"text": "alice's secret"})))
        asked = await alice.post(chat, json={"message": "@agent note it", "sessionId": "alices-session"})
        call = asked.json()["pendingApproval"]["calls"][0]
        asked_of_model = len(llm.requests)

        decisions = [{"type": "approve", "tool_call_id": call["id"]}]
        for body in (
            {"sessionId": "alices-session", "decisions": decisions},
            {"sessionId": "alices-session", "decisions": decisions, "message": "go on"},
        ):
            stolen = await bob.post(chat, json=body)
            assert stolen.status_code == 404, stolen.text
            assert stolen.json()["type"] == "abort" and stolen.json()["error"]
        stolen = await bob.post(
            f"/workspace/{workspace}/thread/alices-session/approve", json={"decisions": decisions}
        )
        assert stolen.status_code == 404, stolen.text

        history = (
            await bob.get(f"/workspace/{workspace}/chats", params={"apiSessionId": "alices-session"})
        ).json()
        assert history == {"history": []}, "bob's attempts started no conversation of his"
        assert len(llm.requests) == asked_of_model, "nothing ran"
        # alice's call still waits for her decision: her own approve runs it, once
        llm.push(text_reply("noted"))
        mine = await alice.post(chat, json={"sessionId": "alices-session", "decisions": decisions})
        assert mine.status_code == 200 and mine.json()["textResponse"] == "noted", mine.text
        saves = [r for r in llm.requests if any(m.get("role") == "tool" for m in r["messages"])]
        assert len(saves) == 1


async def test_decisions_for_a_conversation_waiting_for_nothing_are_409(
    secured_server: str, llm: ScriptedLLM, workspace: str
) -> None:
    """A thread that never ran (``thread/new``) or whose turn is over has nothing to approve."""
    await get_client(url=secured_server, api_key=KEYS["bob"]).assistants.create(
        "agent", context={"workspace": workspace}
    )
    decisions = {"decisions": [{"type": "approve", "tool_call_id": "call-1"}]}
    async with api(secured_server, "bob") as bob:
        made = (await bob.post(f"/workspace/{workspace}/thread/new", json={})).json()["thread"]
        empty = await bob.post(f"/workspace/{workspace}/thread/{made['slug']}/approve", json=decisions)
        assert empty.status_code == 409, empty.text
        said = await bob.post(f"/workspace/{workspace}/chat", json={"message": "hello", "sessionId": "over"})
        assert said.status_code == 200, said.text
        done = await bob.post(f"/workspace/{workspace}/chat", json={"sessionId": "over", **decisions})
        assert done.status_code == 409, done.text
