"""``make serve``: an SDK round trip with an approval, and everything durable across a restart."""

from __future__ import annotations

from langgraph_sdk import get_client

from workspace_agent.checkpoints.db import connection
from workspace_agent.cli.assistants import ensure


async def test_a_pending_approval_survives_a_restart_and_is_resumed(
    serve, approvals, database_url, workspace
):
    served = serve()
    client = get_client(url=served.urls[0])
    assistant, outcome = await ensure(client, "agent", workspace, {})
    assert outcome == "created"
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(
        tid, assistant["assistant_id"], input={"messages": [{"role": "user", "content": "keep alpha"}]}
    )
    state = await client.threads.get_state(tid)
    assert state["next"] == ["approve"]
    request = state["tasks"][0]["interrupts"][0]["value"]
    assert [(a["name"], a["args"]) for a in request["action_requests"]] == [
        ("save_note", {"text": "keep alpha"})
    ]
    first_run = (await client.runs.list(tid))[0]
    assert first_run["status"] == "interrupted"  # Aegra's word for a run waiting on a person

    served.stop()
    served = serve(port=served.port)  # same URL, new processes: nothing of the first is in memory
    client = get_client(url=served.urls[0])

    assert (await client.assistants.get(assistant["assistant_id"]))["context"]["workspace"] == workspace
    assert [r["run_id"] for r in await client.runs.list(tid)] == [first_run["run_id"]]
    state = await client.threads.get_state(tid)
    assert state["next"] == ["approve"]
    assert state["tasks"][0]["interrupts"][0]["value"]["action_requests"] == request["action_requests"]

    out = await client.runs.wait(
        tid, assistant["assistant_id"], command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert out["stop_reason"] == "answered"
    assert out["messages"][-1]["content"].startswith("done: Saved note")
    call_id = request["action_requests"][0]["tool_call_id"]
    assert [d["outcome"] for d in out["decisions"] if d["id"] == "D3"] == [{call_id: "approve"}]
    async with connection(database_url) as conn:
        notes = await (
            await conn.execute("SELECT text FROM notes WHERE workspace = %s", (workspace,))
        ).fetchall()
        chats = await (
            await conn.execute("SELECT prompt, thread_id FROM chat_log WHERE workspace = %s", (workspace,))
        ).fetchall()
    assert [n["text"] for n in notes] == ["keep alpha"]
    assert [(c["prompt"], c["thread_id"]) for c in chats] == [("keep alpha", tid)]
