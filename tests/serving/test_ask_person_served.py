"""Issue 36, item 2, served: the model's question round-trips through the SDK, AnythingLLM's API and Agent
Chat UI on ``langgraph dev`` (with API keys), and a stateless ``/v1`` call never offers it.

- The SDK: the thread's interrupt is ``{"type": "question", ...}``; ``Command(resume={"answer": ...})``
  goes on; a bad answer sent over HTTP asks the same question again and loses nothing.
- ``/api/v1``: the chat reply carries ``pendingQuestion`` and the question as ``textResponse``; the same
  route with ``{"answer": ...}`` answers it; an answer where nothing waits is 409.
- Agent Chat UI: its generic interrupt view shows the question; the person types the answer as a new
  message, which the UI sends after a filler tool result for the pending call
  (``ensureToolCallsHaveResponses`` of ``src/lib/ensure-tool-responses.ts``); the typed text is the answer
  and the turn goes on.
"""

from __future__ import annotations

import openai
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.test_anythingllm_api import api, make_workspace
from workspace_agent.samples.scripted_model import text_reply, tool_reply

CITIES = {"question": "Which office should the trip go to?", "choices": ["Lisbon", "Porto"]}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_the_sdk_answers_a_question(secured_server, llm, workspace):  # noqa: F811
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    thread = (await client.threads.create())["thread_id"]
    context = {"workspace": workspace}
    llm.push(tool_reply(("ask_person", CITIES)), text_reply("Booked for Porto."))
    ask = {"messages": [{"role": "user", "content": "@agent book my trip"}]}
    await client.runs.wait(thread, "agent", input=ask, context=context)
    state = await client.threads.get_state(thread)
    value = state["tasks"][0]["interrupts"][0]["value"]
    assert value["type"] == "question" and value["choices"] == ["Lisbon", "Porto"]

    await client.runs.wait(thread, "agent", context=context, command={"resume": {"answer": ["Porto"]}})
    again = (await client.threads.get_state(thread))["tasks"][0]["interrupts"][0]["value"]
    assert again["tool_call_id"] == value["tool_call_id"] and "text" in again["error"], again

    out = await client.runs.wait(thread, "agent", context=context, command={"resume": {"answer": "porto"}})
    assert out["messages"][-1]["content"] == "Booked for Porto."
    assert tool_results(llm.requests[-1]) == ["Porto"]

    bad_context = {"workspace": workspace, "clarifying_questions": "yes"}
    refused = await client.runs.wait(thread, "agent", input=ask, context=bad_context, raise_error=False)
    assert "clarifying_questions" in str(refused), refused


async def test_anythingllm_api_answers_a_question(secured_server, llm, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        llm.reset()
        llm.push(tool_reply(("ask_person", CITIES)), text_reply("Booked for Lisbon."))
        body = {"message": "@agent book my trip", "sessionId": "trip"}
        asked = await alice.post(f"/workspace/{workspace}/chat", json=body)
        reply = asked.json()
        assert asked.status_code == 200, asked.text
        assert reply["pendingQuestion"]["question"] == CITIES["question"]
        assert reply["pendingQuestion"]["choices"] == CITIES["choices"]
        assert CITIES["question"] in reply["textResponse"] and "pendingApproval" not in reply

        approve = {"sessionId": "trip", "decisions": [{"type": "approve"}]}
        assert (await alice.post(f"/workspace/{workspace}/chat", json=approve)).status_code == 409
        wrong = await alice.post(
            f"/workspace/{workspace}/chat", json={"sessionId": "trip", "answer": "Madrid"}
        )
        assert wrong.status_code == 400 and "Lisbon" in wrong.json()["error"], wrong.text
        assert wrong.json()["pendingQuestion"]["id"] == reply["pendingQuestion"]["id"], "still waiting"

        answered = await alice.post(
            f"/workspace/{workspace}/chat", json={"sessionId": "trip", "answer": "Lisbon"}
        )
        assert answered.status_code == 200 and answered.json()["textResponse"] == "Booked for Lisbon."
        assert "pendingQuestion" not in answered.json() and answered.json()["chatId"] is not None
        late = await alice.post(f"/workspace/{workspace}/chat", json={"sessionId": "trip", "answer": "Porto"})
        assert late.status_code == 409
        typed = await alice.post(f"/workspace/{workspace}/chat", json={"sessionId": "trip", "answer": 7})
        assert typed.status_code == 400


async def test_agent_chat_ui_answers_by_typing(secured_server, llm):  # noqa: F811
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    thread = (await client.threads.create())["thread_id"]
    llm.reset()
    llm.push(tool_reply(("ask_person", {"question": "Which date suits you?"})), text_reply("Set for Friday."))
    ask = {"messages": [{"type": "human", "content": [{"type": "text", "text": "@agent plan the meeting"}]}]}
    await client.runs.wait(thread, "agent", input=ask)
    state = await client.threads.get_state(thread)
    call_id = state["tasks"][0]["interrupts"][0]["value"]["tool_call_id"]
    typed = {  # handleSubmit of src/components/thread/index.tsx, after ensureToolCallsHaveResponses
        "messages": [
            {
                "type": "tool",
                "tool_call_id": call_id,
                "id": "do-not-render-4f1c2a7e-0b6d-4e8a-9c51-3d2f7a1b9e60",
                "name": "ask_person",
                "content": "Successfully handled tool call.",
            },
            {
                "id": "7d9e2b4a-1c3f-4a5b-8e6d-0f1a2b3c4d5e",
                "type": "human",
                "content": [{"type": "text", "text": "Friday"}],
            },
        ]
    }
    out = await client.runs.wait(thread, "agent", input=typed)
    assert out["messages"][-1]["content"] == "Set for Friday."
    assert tool_results(llm.requests[-1]) == ["Friday"], "the typed text is the answer"
    humans = [m for m in out["messages"] if m["type"] == "human"]
    assert len(humans) == 1, "the answer continues the turn; it does not start a new one"


async def test_a_stateless_v1_call_is_never_asked(secured_server, llm, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    client = openai.AsyncOpenAI(base_url=f"{secured_server}/v1", api_key=KEYS["alice"], max_retries=0)
    llm.reset()
    llm.push(tool_reply(("ask_person", CITIES)), text_reply("I picked Lisbon."))
    reply = await client.chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": "@agent book my trip"}]
    )
    assert reply.choices[0].message.content == "I picked Lisbon."
    assert "ask_person" not in [t["function"]["name"] for t in llm.requests[0].get("tools", [])]
