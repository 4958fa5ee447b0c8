"""Time travel stays true: a fork or a replay from an earlier checkpoint gives the model that past only.

History is read from the checkpoint's own ``messages``. Reading it from the chat log by thread id (as
before) handed a fork taken after turn 1 the later turn 2, which that branch never had.
"""

from __future__ import annotations

from langgraph_sdk import get_client

from tests.support.helpers import user_message
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import ScriptedLLM, last_user_text, meant_for, text_reply


def texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"][1:]]


def asked(llm: ScriptedLLM, question: str) -> dict:
    """The last model request that asks ``question``, not one a run left behind by another test."""
    return next(r for r in reversed(llm.requests) if last_user_text(r) == question)


async def test_a_new_message_on_a_fork_after_turn_1_gives_the_model_turn_1_only(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread_id = (await client.threads.create())["thread_id"]
    context = {"workspace": workspace, "chat_mode": "chat"}
    # Each reply is meant for its question: the dev server is shared by the session, and a run an earlier
    # test left behind must not take turn 1's answer (it did once in CI, on a busy machine).
    llm.push(
        meant_for("My name is Ann.", text_reply("Hello Ann.")),
        meant_for("My name is Bob.", text_reply("Hello Bob.")),
    )
    await client.runs.wait(thread_id, "agent", input=user_message("My name is Ann."), context=context)
    await client.runs.wait(thread_id, "agent", input=user_message("My name is Bob."), context=context)

    history = await client.threads.get_history(thread_id, limit=100)
    after_turn_1 = next(
        h for h in history if not h["next"] and h["values"]["messages"][-1]["content"] == "Hello Ann."
    )
    llm.push(meant_for("What is my name?", text_reply("Your name is Ann.")))
    await client.runs.wait(
        thread_id,
        "agent",
        input=user_message("What is my name?"),
        context=context,
        checkpoint_id=after_turn_1["checkpoint"]["checkpoint_id"],
    )
    assert texts(asked(llm, "What is my name?")) == ["My name is Ann.", "Hello Ann.", "What is my name?"]
    fork = (await client.threads.get_state(thread_id))["values"]["messages"]
    assert [m["content"] for m in fork] == [
        "My name is Ann.",
        "Hello Ann.",
        "What is my name?",
        "Your name is Ann.",
    ]


async def test_update_state_then_invoke_from_an_earlier_checkpoint(llm, saver, workspace, thread):
    """Studio's edit-and-rerun, programmatically: ``update_state`` at a checkpoint, then ``invoke(None)``."""
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode="chat")
    llm.push(text_reply("one"), text_reply("two"))
    await graph.ainvoke(user_message("turn 1"), thread, context=context)
    await graph.ainvoke(user_message("turn 2"), thread, context=context)
    states = [s async for s in graph.aget_state_history(thread)]
    after_turn_1 = next(s for s in states if not s.next and s.values["messages"][-1].content == "one")
    edited = {"messages": [{"role": "user", "content": "turn 2, edited"}]}
    forked = await graph.aupdate_state(after_turn_1.config, edited, as_node="__start__")
    llm.push(text_reply("edited answer"))
    out = await graph.ainvoke(None, forked, context=context)
    assert texts(llm.requests[-1]) == ["turn 1", "one", "turn 2, edited"]
    assert [m.content for m in out["messages"]] == ["turn 1", "one", "turn 2, edited", "edited answer"]

    # Replaying turn 2 of the original branch from its model call sees turn 1 and not the edited fork.
    before_model = next(
        s for s in states if s.next == ("call_model",) and s.values["messages"][-1].content == "turn 2"
    )
    llm.push(text_reply("two again"))
    await graph.ainvoke(None, before_model.config, context=context)
    assert texts(llm.requests[-1]) == ["turn 1", "one", "turn 2"]
