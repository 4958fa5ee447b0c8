"""Model endpoint faults are named: which endpoint, what happened, which setting to change.

A broken model endpoint — nothing listening, a body that is not a chat completion, no ``choices``, a hang —
fails the turn with a message a person can act on, in the client they use (the graph's caller, the CLI,
an SDK run through ``langgraph dev``), and the thread's next turn works once the endpoint does. A hung
model holds a turn for at most ``MODEL_TIMEOUT`` (default 120 s) per attempt, not 10 minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.support.helpers import free_port, user_message
from workspace_agent.core.context import Context
from workspace_agent.core.settings import DEFAULT_TIMEOUT, model_settings
from workspace_agent.graphs.agent import build_graph
from workspace_agent.providers.chat.models import ModelEndpointError, chat_model
from workspace_agent.samples.scripted_model import text_reply

ROOT = Path(__file__).resolve().parents[2]


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


async def turn(graph, thread, workspace: str, text: str, *, stream: bool) -> dict:
    context = Context(workspace=workspace)
    if stream:  # the messages stream mode makes the model stream, as Studio and Agent Chat UI do
        async for _ in graph.astream(user_message(text), thread, context=context, stream_mode="messages"):
            pass
        return (await graph.aget_state(thread)).values
    return await graph.ainvoke(user_message(text), thread, context=context)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("fault", "said"),
    [("garbage", "not an OpenAI chat completion"), ("empty_choices", "no choices")],
)
async def test_a_broken_reply_names_the_endpoint_and_the_thread_goes_on(
    llm, saver, workspace, thread, fault, said, stream
):
    graph = build_graph(checkpointer=saver)
    llm.push({"fault": fault})
    with pytest.raises(ModelEndpointError) as raised:
        await turn(graph, thread, workspace, "hello", stream=stream)
    message = str(raised.value)
    assert llm.base_url in message and "OPENAI_BASE_URL" in message and said in message, message
    llm.push(text_reply("back again"))
    out = await turn(graph, thread, workspace, "hello again", stream=stream)
    assert out["messages"][-1].content == "back again"


async def test_a_hung_model_is_given_up_after_model_timeout(llm, saver, workspace, thread, monkeypatch):
    monkeypatch.setenv("MODEL_TIMEOUT", "1")
    graph = build_graph(checkpointer=saver)
    llm.push({"delay": 20, "content": "too late"}, {"delay": 20, "content": "too late"})
    started = time.monotonic()
    with pytest.raises(ModelEndpointError) as raised:
        await graph.ainvoke(user_message("hello"), thread, context=Context(workspace=workspace))
    elapsed = time.monotonic() - started
    assert elapsed < 10, elapsed  # one retry by default: about two timeouts
    assert "did not answer within 1 s" in str(raised.value) and "MODEL_TIMEOUT" in str(raised.value)
    assert llm.base_url in str(raised.value)


def test_the_default_timeout_is_minutes_not_ten(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # an endpoint (the local model: 300 s)
    monkeypatch.delenv("MODEL_TIMEOUT", raising=False)
    monkeypatch.delenv("MODEL_MAX_RETRIES", raising=False)
    settings = model_settings()
    assert settings.timeout == DEFAULT_TIMEOUT <= 120 and settings.max_retries == 1
    client = chat_model("any")
    assert client.request_timeout == DEFAULT_TIMEOUT and client.max_retries == 1
    monkeypatch.setenv("MODEL_TIMEOUT", "7")
    assert chat_model("any").stream_chunk_timeout == 7  # a streamed reply waits as long for its first token
    monkeypatch.setenv("MODEL_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MODEL_TIMEOUT"):
        model_settings()


async def test_nothing_listening_names_the_endpoint_and_the_setting(
    llm, saver, workspace, thread, monkeypatch
):
    url = closed_port_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=saver)
    with pytest.raises(ModelEndpointError) as raised:
        await graph.ainvoke(user_message("hello"), thread, context=Context(workspace=workspace))
    assert url in str(raised.value) and "cannot be reached" in str(raised.value)
    assert "set OPENAI_BASE_URL" in str(raised.value)
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)  # fixed: the same thread answers
    graph = build_graph(checkpointer=saver)  # a graph keeps the settings it was built with
    llm.push(text_reply("reachable now"))
    out = await graph.ainvoke(user_message("hello"), thread, context=Context(workspace=workspace))
    assert out["messages"][-1].content == "reachable now"


def test_the_cli_names_an_unreachable_endpoint(database_url, tmp_path):
    url = closed_port_url()
    env = {**os.environ, "OPENAI_BASE_URL": url, "WORKSPACE_AGENT_HOME": os.environ["WORKSPACE_AGENT_HOME"]}
    cli = Path(sys.executable).with_name("workspace-agent")
    done = subprocess.run(
        [str(cli), "ask", "hello"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert url in done.stderr and "OPENAI_BASE_URL" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


async def test_through_the_dev_server_the_run_error_names_the_endpoint(llm, dev_server):
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    llm.push({"fault": "garbage"})
    with pytest.raises(Exception) as raised:
        await client.runs.wait(thread["thread_id"], "agent", input=user_message("hello"))
    assert "ModelEndpointError" in str(raised.value) and llm.base_url in str(raised.value)
    assert "OPENAI_BASE_URL" in str(raised.value)
    llm.push(text_reply("working again"))
    out = await client.runs.wait(thread["thread_id"], "agent", input=user_message("hello"))
    assert out["messages"][-1]["content"] == "working again"
