"""The thread shows the conversation, through ``langgraph dev`` and ``langgraph_sdk``, as Agent Chat UI
reads it.

Agent Chat UI shows a thread's ``values.messages`` and nothing else, on every reload. Those messages must
hold the earlier exchanges, in order, as the person typed them, and be the history the model is given.
"""

from __future__ import annotations

from langgraph_sdk import get_client

from tests.support.helpers import user_message
from workspace_agent.samples.scripted_model import last_user_text, meant_for, text_reply, tool_reply


def shown(messages: list[dict]) -> list[tuple[str, str]]:
    """A thread's messages as (type, text) pairs, tool calls named."""
    out = []
    for m in messages:
        text = m["content"] if isinstance(m["content"], str) else str(m["content"])
        if m.get("tool_calls"):
            text = "calls " + ",".join(c["name"] for c in m["tool_calls"])
        out.append((m["type"], text))
    return out


def sent_history(request: dict) -> list[tuple[str, str]]:
    """The earlier exchanges a recorded model request carried: between the system prompt and the message."""
    kinds = {"user": "human", "assistant": "ai"}
    return [(kinds[m["role"]], m["content"]) for m in request["messages"][1:-1]]


async def test_chat_then_agent_with_approval_both_stay_in_the_thread_and_reach_the_model(
    dev_server, llm, workspace
):
    client = get_client(url=dev_server)
    assistant = await client.assistants.create(
        "agent", context={"workspace": workspace, "chat_mode": "chat"}, name=workspace
    )
    thread_id = (await client.threads.create())["thread_id"]
    aid = assistant["assistant_id"]

    # Each reply is taken only by this thread's request for it: the worker's scripted server is shared.
    llm.push(meant_for("Hi, I am Ann.", text_reply("Hello Ann, nice to meet you.")))
    await client.runs.wait(thread_id, aid, input=user_message("Hi, I am Ann."))
    tea = "remember that I like tea"
    llm.push(
        meant_for(tea, tool_reply(("save_note", {"text": "Ann likes tea"}))),
        meant_for(tea, text_reply("Noted: Ann likes tea.")),
    )
    await client.runs.wait(thread_id, aid, input=user_message("@agent remember that I like tea"))
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["approve"], "turn 2 waits for the person's approval"
    await client.runs.wait(thread_id, aid, command={"resume": {"decisions": [{"type": "approve"}]}})

    state = await client.threads.get_state(thread_id)
    messages = state["values"]["messages"]
    assert shown(messages) == [
        ("human", "Hi, I am Ann."),
        ("ai", "Hello Ann, nice to meet you."),
        ("human", "@agent remember that I like tea"),
        ("ai", "calls save_note"),
        ("tool", messages[4]["content"]),
        ("ai", "Noted: Ann likes tea."),
    ]
    assert messages[4]["content"].startswith("Saved note")
    decisions = [d["id"] for d in state["values"]["decisions"]]
    assert decisions[0] == "A3" and "D3" in decisions, "the trace shows the running turn's decisions"
    assert decisions.count("A3") == 1, "and only the running turn's"

    reloaded = await client.threads.get(thread_id)  # what a reload or the thread list reads
    assert shown(reloaded["values"]["messages"]) == shown(messages)

    llm.push(meant_for("What do I like?", text_reply("You told me you like tea.")))
    await client.runs.wait(thread_id, aid, input=user_message("What do I like?"))
    after = (await client.threads.get_state(thread_id))["values"]["messages"]
    assert shown(after) == [
        ("human", "Hi, I am Ann."),
        ("ai", "Hello Ann, nice to meet you."),
        ("human", "@agent remember that I like tea"),
        ("ai", "Noted: Ann likes tea."),
        ("human", "What do I like?"),
        ("ai", "You told me you like tea."),
    ]
    # Turn 3's request holds exactly the history the thread shows; @agent was an instruction to route.
    expected = [(kind, text.removeprefix("@agent ")) for kind, text in shown(after)[:4]]
    ours = [r for r in llm.requests if last_user_text(r) in ("Hi, I am Ann.", tea, "What do I like?")]
    assert [last_user_text(r) for r in ours] == ["Hi, I am Ann.", tea, tea, "What do I like?"], (
        "one model call per chat turn, two for the approved call"
    )
    assert sent_history(ours[-1]) == expected
    assert ours[-1]["messages"][-1]["content"] == "What do I like?"


async def test_earlier_decisions_stay_reachable_through_the_checkpoint_history(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    context = {"workspace": workspace, "chat_mode": "chat"}
    for text in ("first question", "second question"):
        llm.push(text_reply(f"answer to {text}"))
        await client.runs.wait(thread_id, "agent", input=user_message(text), context=context)
    history = await client.threads.get_history(thread_id, limit=100)
    finished = [h for h in history if not h["next"] and h["values"].get("stop_reason")]
    prompts = {
        next(m["content"] for m in reversed(h["values"]["messages"]) if m["type"] == "human")
        for h in finished
    }
    assert prompts == {"first question", "second question"}
    assert all(h["values"]["decisions"][-1]["id"] == "G1" for h in finished)
