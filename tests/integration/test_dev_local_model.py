"""``langgraph dev`` with no model settings answers from the embedded local model (marker ``local_model``).

As a new user runs it: no ``OPENAI_BASE_URL``, no key, no ``CHAT_MODEL``, no ``DATABASE_URL``. The dev
server starts the shared local model server on first use, applies the model's facts (prompted tools, a
4096-token window), and a CLI run in the same data folder at the same time uses the same model server and
the same database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from langgraph_sdk import get_client

from tests.conftest import ROOT, start_dev_server, stop_process
from workspace_agent.providers.local.model_server import find_shared_model, stop_shared_model

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900)]

MODEL_SETTINGS = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "CHAT_MODEL",
    "NATIVE_TOOL_CALLING",
    "CONTEXT_WINDOW",
    "DATABASE_URL",
    "EMBEDDING_MODEL",
)


#: The JSON schema a ``/v1`` client asks the local model's reply to follow.
PLACE = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


def bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in MODEL_SETTINGS}
    return env | {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}


def model_server_processes() -> list[str]:
    """Command lines of the model server processes serving this data folder's model file."""
    home = os.environ["WORKSPACE_AGENT_HOME"]
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "providers.local.model_server" in args and home in args:
            found.append(args)
    return found


async def test_dev_server_without_settings_answers_from_the_local_model(tmp_path: Path, database_url):
    stop_shared_model()
    proc, url = start_dev_server(bare_env(), tmp_path / "dev.log")
    try:
        client = get_client(url=url)
        thread = await client.threads.create()
        out = await client.runs.wait(
            thread["thread_id"], "agent", input={"messages": [{"role": "user", "content": "hello"}]}
        )
        assert "__error__" not in out, out
        answer = out["messages"][-1]
        assert answer["type"] == "ai" and answer["content"].strip(), out
        a3 = next(d for d in out["decisions"] if d["id"] == "A3")
        assert a3["outcome"] == "chat" and "natively" in a3["why"]  # the provider's fact, not True
        b11 = next(d for d in out["decisions"] if d["id"] == "B11")
        assert "4096" in b11["why"], b11  # the server's real window, not the family's 32768
        model = find_shared_model()
        assert model is not None and model.n_ctx == 4096

        # The same thread, its history now holding "hello": @agent still uses its tool, and the answer
        # streams to the stream modes Agent Chat UI's useStream asks for, token by token.
        parts, progress, answer_id = await stream_agent_turn(client, thread["thread_id"])
        calls = [d["outcome"] for d in parts["decisions"] if d["id"] == "C1" and d["outcome"] != "answer"]
        assert ["calculate"] in calls, parts["decisions"]
        final = parts["messages"][-1]
        assert "7006652" in final["content"].replace(",", ""), final
        streamed = [c for c in parts["chunks"] if c["id"] == final["id"] and c["content"]]
        assert len(streamed) >= 3, f"the answer arrived in {len(streamed)} chunk(s)"
        assert "".join(c["content"] for c in streamed) == final["content"]
        assert not any('"name"' in c["content"] for c in parts["chunks"]), "calls never stream as text"
        assert progress[:2] == ["reading", "writing"] and answer_id == final["id"]

        # @agent: the model writes its call as text, under the call grammar, and the call runs.
        question = "@agent What is the current date and time? Use a tool."  # as test_local_agent asks
        ask = {"messages": [{"role": "user", "content": question}]}
        out = await client.runs.wait((await client.threads.create())["thread_id"], "agent", input=ask)
        assert "__error__" not in out, out
        c1 = [d for d in out["decisions"] if d["id"] == "C1" and d["outcome"] != "answer"]
        assert c1 and "under the call grammar" in c1[0]["why"], out["decisions"]
        ran = [d for d in out["decisions"] if d["id"] == "C10" and isinstance(d["outcome"], dict)]
        assert ran and "ok" in ran[0]["outcome"].values(), out["decisions"]

        # A CLI at the same time, same data folder: the same model server and the same database.
        cli = Path(sys.executable).with_name("workspace-agent")
        done = subprocess.run(
            [str(cli), "ask", "--json", "Say hi."],
            cwd=ROOT,
            env=bare_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1])["answer"].strip()
        assert find_shared_model() == model
        assert len(model_server_processes()) == 1, model_server_processes()

        # /v1 with a JSON schema: llama.cpp turns the response_format into a grammar, so the reply parses.
        client_v1 = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        shaped = await client_v1.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": "Name a city in Portugal and its country."}],
            response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": PLACE}},
            max_tokens=60,
        )
        place = json.loads(shaped.choices[0].message.content or "")
        assert set(place) == {"city", "country"} and all(isinstance(v, str) for v in place.values()), place
    finally:
        stop_process(proc)
        stop_shared_model()


async def stream_agent_turn(client, thread_id: str) -> tuple[dict, list[str], str | None]:
    """Stream "@agent what is 1234*5678?" as Agent Chat UI does; the final values, progress, answer id."""
    ask = {"messages": [{"role": "user", "content": "@agent what is 1234*5678?"}]}
    parts: dict = {"chunks": []}
    progress: list[str] = []
    answer_id = None
    async for event in client.runs.stream(
        thread_id, "agent", input=ask, stream_mode=["values", "messages-tuple", "custom"]
    ):
        if event.event == "values":
            parts.update(event.data)
        elif event.event == "messages":
            chunk, meta = event.data
            if meta.get("langgraph_node") == "call_model":
                parts["chunks"].append(chunk)
                answer_id = answer_id if not chunk.get("content") else chunk["id"]
        elif event.event == "custom":
            progress.append(event.data["progress"])
        elif event.event == "error":
            raise AssertionError(event.data)
    return parts, progress, answer_id


def test_processes_starting_at_once_share_one_model_server(database_url):
    """Two processes that both need the model at the same moment: one server, no port clash."""
    stop_shared_model()
    code = "from workspace_agent.providers.local.model_server import shared_model_server as s; print(s().pid)"
    try:
        starters = [
            subprocess.Popen([sys.executable, "-c", code], env=bare_env(), stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        pids = {p.communicate(timeout=600)[0].strip() for p in starters}
        assert len(pids) == 1 and all(p.returncode == 0 for p in starters), pids
        assert len(model_server_processes()) == 1
        # It outlives the processes that started it, and a stop ends it.
        assert find_shared_model() is not None and str(find_shared_model().pid) in pids
        assert stop_shared_model() and find_shared_model() is None
    finally:
        stop_shared_model()


async def test_a_dead_model_server_is_named_then_restarted_on_the_next_turn(saver, workspace, monkeypatch):
    """Programmatic use with no settings: the local model; if its server dies, one turn fails saying so."""
    import signal

    from tests.support.helpers import user_message
    from workspace_agent.core.context import Context
    from workspace_agent.graphs.agent import build_graph
    from workspace_agent.providers.chat.models import ModelEndpointError

    for name in MODEL_SETTINGS[:-2]:
        monkeypatch.delenv(name, raising=False)
    graph = build_graph(checkpointer=saver)
    thread = {"configurable": {"thread_id": f"local-{workspace}"}}
    context = Context(workspace=workspace)
    try:
        first = await graph.ainvoke(user_message("hello"), thread, context=context)
        assert first["messages"][-1].content.strip()
        dead = find_shared_model()
        assert dead is not None
        os.kill(dead.pid, signal.SIGKILL)
        with pytest.raises(ModelEndpointError) as raised:
            await graph.ainvoke(user_message("hello again"), thread, context=context)
        assert "embedded local model" in str(raised.value) and dead.base_url in str(raised.value)
        third = await graph.ainvoke(user_message("and again"), thread, context=context)
        assert third["messages"][-1].content.strip()
        assert find_shared_model().pid != dead.pid
    finally:
        stop_shared_model()
