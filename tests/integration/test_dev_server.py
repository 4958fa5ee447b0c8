"""The agent under ``langgraph dev``, driven through ``langgraph_sdk`` as Studio and web clients drive it."""

from __future__ import annotations

from langgraph_sdk import get_client

from workspace_agent.samples.scripted_model import text_reply, tool_reply


async def test_studio_sees_the_context_fields_with_descriptions(dev_server):
    client = get_client(url=dev_server)
    assistant = (await client.assistants.search(graph_id="agent"))[0]
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    fields = schemas["context_schema"]["properties"]
    assert {"workspace", "history_limit", "approval_required", "auto_approved", "mcp_servers"} <= set(fields)
    assert all(f.get("description") for f in fields.values())
    assert "messages" in schemas["input_schema"]["properties"]
    assert {"route", "sources", "stop_reason", "decisions"} <= set(schemas["output_schema"]["properties"])
    graph = await client.assistants.get_graph(assistant["assistant_id"])
    assert {
        "route",
        "load_history",
        "retrieve",
        "trim",
        "call_model",
        "approve",
        "execute_tool",
        "finish",
    } <= {n["id"] for n in graph["nodes"]}


async def test_run_interrupt_resume_answer_through_the_sdk(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    assistant = await client.assistants.create(
        "agent", context={"workspace": workspace, "auto_approved": ["current_datetime"]}, name=workspace
    )
    thread = await client.threads.create()
    llm.push(tool_reply(("save_note", {"text": "from the sdk"})), text_reply("saved it"))
    await client.runs.wait(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"messages": [{"role": "user", "content": "note this"}]},
    )
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["approve"]
    request = state["tasks"][0]["interrupts"][0]["value"]
    assert request["action_requests"][0]["name"] == "save_note"
    assert request["action_requests"][0]["args"] == {"text": "from the sdk"}

    pieces = []
    async for part in client.runs.stream(
        thread["thread_id"],
        assistant["assistant_id"],
        command={"resume": {"decisions": [{"type": "approve"}]}},
        stream_mode="messages-tuple",
    ):
        if part.event == "messages" and part.data[1].get("langgraph_node") == "call_model":
            pieces.append(part.data[0].get("content") or "")
    assert "".join(pieces) == "saved it"

    state = await client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert values["stop_reason"] == "answered" and values["messages"][-1]["content"] == "saved it"
    ids = [d["id"] for d in values["decisions"]]
    assert (
        ids[0] == "A3" and {"B4", "B8"} <= set(ids[1:4]) and "B11" in ids and "D3" in ids and ids[-1] == "G1"
    )
    call_id = request["action_requests"][0]["tool_call_id"]
    assert [d["outcome"] for d in values["decisions"] if d["id"] == "D3"] == [{call_id: "approve"}]
    tool_answer = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_answer and tool_answer[0]["content"].startswith("Saved note")


async def test_a_bad_resume_through_the_sdk_keeps_the_approval(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    llm.push(tool_reply(("save_note", {"text": "x"})))
    await client.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "n"}]},
        context={"workspace": workspace},
    )
    await client.runs.wait(
        thread["thread_id"],
        "agent",
        command={"resume": {"decisions": "approve"}},
        context={"workspace": workspace},
    )
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["approve"]
    assert "resume with" in state["tasks"][0]["interrupts"][0]["value"]["error"]
