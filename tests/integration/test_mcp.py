"""MCP tools end to end: real FastMCP servers over stdio, SSE and streamable HTTP, the real agent graph.

The servers (tests/support/mcp_servers/recorder.py) write every call they receive to a file before running
it, so each test asserts what actually ran, in which process. The servers file is the deployment's
(``MCP_CONFIG``), so each test writes one and points the environment at it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command
from rich.console import Console

from tests.support.helpers import decisions_of, free_port, user_message
from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.cli.mcp_view import show_mcp
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.services import Services
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills.mcp import MAX_NAME, close_mcp, load_mcp, tool_name
from workspace_agent.skills.mcp.config import ENV_VAR

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tests" / "support" / "mcp_servers" / "recorder.py"


# ------------------------------------------------------------------------------------------------ helpers


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server on port {port} exited with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}")


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stdio(label: str, record: Path, **extra: Any) -> dict[str, Any]:
    """A servers-file block starting the recorder over stdio."""
    block = {
        "command": sys.executable,
        "args": [str(RECORDER)],
        "env": {"MCP_LABEL": label, "MCP_RECORD": str(record)},
    }
    return {**block, **extra}


def write_servers(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / f"mcp-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.fixture
def deploy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Write a servers file and make it the deployment's (``MCP_CONFIG``), as an operator would."""

    def deploy(servers: dict[str, Any]) -> Path:
        path = write_servers(tmp_path, servers)
        monkeypatch.setenv(ENV_VAR, str(path))
        return path

    return deploy


def text_of(content: Any) -> str:
    """The text of a tool's content: langchain-mcp-adapters gives a list of content blocks."""
    if isinstance(content, str):
        return content
    parts = [b if isinstance(b, str) else b.get("text", "") for b in content]
    return "\n".join(parts)


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


class HttpServers:
    """The recorder over SSE and over streamable HTTP, started once for the module."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.sse_port, self.http_port = free_port(), free_port()
        self.procs: list[subprocess.Popen] = []

    def start(self) -> HttpServers:
        for label, transport, port in (
            ("sse", "sse", self.sse_port),
            ("web", "streamable-http", self.http_port),
        ):
            env = {**os.environ, "MCP_LABEL": label, "MCP_RECORD": str(self.record)}
            proc = subprocess.Popen(
                [sys.executable, str(RECORDER), "--transport", transport, "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.procs.append(proc)
        for proc, port in zip(self.procs, (self.sse_port, self.http_port), strict=True):
            wait_for_port(port, proc)
        return self

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()

    def sse(self) -> dict[str, Any]:
        return {"url": f"http://127.0.0.1:{self.sse_port}/sse"}

    def http(self) -> dict[str, Any]:
        return {
            "type": "streamable",
            "url": f"http://127.0.0.1:{self.http_port}/mcp",
            "headers": {"X-T": "1"},
        }


@pytest.fixture(scope="module")
def http_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServers]:
    servers = HttpServers(tmp_path_factory.mktemp("mcp-http") / "calls.jsonl").start()
    yield servers
    servers.stop()


@pytest.fixture
def http_record(http_servers: HttpServers) -> Path:
    http_servers.record.write_text("")  # tests run one at a time: each sees only its own calls
    return http_servers.record


@pytest.fixture(autouse=True)
async def close_sessions() -> AsyncIterator[None]:
    yield
    await close_mcp()  # every test starts its servers afresh, and none outlives the test


def ctx(workspace: str, **kw: Any) -> Context:
    return Context(workspace=workspace, **kw)


# -------------------------------------------------------------------------------------------------- tests


async def test_three_calls_on_two_servers_one_approval_two_run_all_answered(
    llm, saver, workspace, thread, tmp_path, deploy, http_servers, http_record
):
    record = tmp_path / "files.jsonl"
    deploy({"files": stdio("files", record), "web": http_servers.http()})
    graph = build_graph(checkpointer=saver)
    ask = tool_reply(
        ("files-echo", {"text": "one"}),
        ("web-add", {"a": 2, "b": 3}),
        ("web-echo", {"text": "never"}),
    )
    ids = [c["id"] for c in ask["tool_calls"]]
    llm.push(ask, text_reply("two of three"))

    out = await graph.ainvoke(user_message("go"), thread, context=ctx(workspace))
    # the model was offered the servers' tools with their own descriptions and schemas
    tools = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    assert tools["files-echo"]["description"] == "Repeat the given text back."
    assert tools["web-add"]["parameters"]["properties"].keys() == {"a", "b"}
    # one interrupt lists all three calls: MCP tools ask by default (D21)
    request = out["__interrupt__"][0].value
    assert request["type"] == "tool_approval"
    actions = request["action_requests"]
    assert [a["tool_call_id"] for a in actions] == ids
    assert [(a["server"], a["tool"], a["args"]) for a in actions] == [
        ("files", "echo", {"text": "one"}),
        ("web", "add", {"a": 2, "b": 3}),
        ("web", "echo", {"text": "never"}),
    ]
    assert actions[1]["description"] == "Add two integers."
    assert records(record) == [] and records(http_record) == [], "nothing runs before the person decides"

    resume = {
        "decisions": [
            {"type": "reject", "tool_call_id": ids[2], "message": "not that one"},
            {"type": "approve", "tool_call_id": ids[0]},
            {"type": "approve", "tool_call_id": ids[1]},
        ]
    }
    out = await graph.ainvoke(Command(resume=resume), thread, context=ctx(workspace))
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "two of three"
    ran = [(r["server"], r["tool"], r["args"]) for r in records(record) + records(http_record)]
    assert sorted(ran) == [("files", "echo", {"text": "one"}), ("web", "add", {"a": 2, "b": 3})]
    answers = {m["tool_call_id"]: text_of(m["content"]) for m in tool_messages(llm.requests[1])}
    assert answers.keys() == set(ids)
    assert answers[ids[0]] == "one" and answers[ids[1]] == "5"
    assert "Rejected" in answers[ids[2]] and "not that one" in answers[ids[2]]
    people = {
        k: v for d in decisions_of(out, "D21") if d["decided_by"] == "person" for k, v in d["outcome"].items()
    }
    assert people == {ids[0]: "approve", ids[1]: "approve", ids[2]: "reject"}


async def test_ten_calls_to_one_stdio_server_start_one_process_kept_across_turns_and_loops(
    llm, saver, workspace, thread, tmp_path, deploy
):
    record = tmp_path / "calls.jsonl"
    deploy({"rec": stdio("rec", record)})
    graph = build_graph(checkpointer=saver)
    context = ctx(workspace, auto_approved=["rec-*"], max_tool_calls=20)
    llm.push(tool_reply(*[("rec-echo", {"text": str(i)}) for i in range(10)]), text_reply("ten"))
    out = await graph.ainvoke(user_message("ten calls"), thread, context=context)
    assert out["stop_reason"] == "answered"
    calls = records(record)
    assert sorted(int(c["args"]["text"]) for c in calls) == list(range(10))
    assert len({c["pid"] for c in calls}) == 1, "one server process, not one per call"
    assert sorted(int(text_of(m["content"])) for m in tool_messages(llm.requests[1])) == list(range(10))
    d21 = decisions_of(out, "D21")
    assert len(d21) == 10 and all(d["decided_by"] == "policy" for d in d21), "rec-* is auto-approved"
    assert decisions_of(out, "D3") == [], "MCP calls are recorded under D21"

    # the next turn uses the same session, and so does a call made from another thread's event loop
    llm.push(tool_reply(("rec-pid", {})), text_reply("same"))
    await graph.ainvoke(user_message("again"), thread, context=context)
    tool = {t.name: t for t in (await load_mcp()).tools}["rec-pid"]
    other_loop = text_of(await asyncio.to_thread(lambda: asyncio.run(tool.ainvoke({}))))
    pids = {c["pid"] for c in records(record)}
    assert pids == {calls[0]["pid"], int(other_loop)}
    assert len(pids) == 1


async def test_a_server_that_dies_mid_turn_fails_that_call_only_and_is_restarted_next_turn(
    llm, saver, workspace, thread, tmp_path, deploy, http_servers, http_record
):
    record = tmp_path / "calls.jsonl"
    deploy({"rec": stdio("rec", record), "web": http_servers.http()})
    graph = build_graph(checkpointer=saver)
    context = ctx(workspace, auto_approved=["*"])
    ask = tool_reply(("rec-die", {}), ("web-echo", {"text": "still here"}), ("web-fail", {"message": "boom"}))
    llm.push(ask, text_reply("one failed"))
    out = await graph.ainvoke(user_message("go"), thread, context=context)
    assert out["stop_reason"] == "answered"
    answers = {m["tool_call_id"]: text_of(m["content"]) for m in tool_messages(llm.requests[1])}
    died, echoed, failed = (c["id"] for c in ask["tool_calls"])
    assert answers[died].startswith("Error:") and "went away" in answers[died]
    assert answers[echoed] == "still here", "the other server was not affected"
    # an MCP error result (isError) is an error tool message, not a success
    assert answers[failed].startswith("Error: web-fail failed") and "boom" in answers[failed]
    outcomes = {
        k: v
        for d in decisions_of(out, "C10")
        if isinstance(d["outcome"], dict)
        for k, v in d["outcome"].items()
    }
    assert outcomes == {died: "error", echoed: "ok", failed: "error"}
    dead_pid = records(record)[0]["pid"]

    llm.push(tool_reply(("rec-pid", {})), text_reply("back"))
    out = await graph.ainvoke(user_message("again"), thread, context=context)
    assert out["stop_reason"] == "answered"
    new_pid = int(text_of(tool_messages(llm.requests[-1])[-1]["content"]))
    assert new_pid != dead_pid and [r["pid"] for r in records(record)] == [dead_pid, new_pid]


async def test_a_hanging_tool_times_out_the_turn_answers_and_the_next_call_gets_a_fresh_session(
    llm, saver, workspace, thread, tmp_path, deploy
):
    record = tmp_path / "calls.jsonl"
    deploy({"rec": stdio("rec", record)})
    graph = build_graph(checkpointer=saver)
    context = ctx(workspace, auto_approved=["rec-*"], tool_timeout=1.0)
    ask = tool_reply(("rec-slow", {"seconds": 60}), ("rec-echo", {"text": "quick"}))
    llm.push(ask, text_reply("gave up on one"))
    started = time.monotonic()
    out = await graph.ainvoke(user_message("go"), thread, context=context)
    assert time.monotonic() - started < 10
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "gave up on one"
    answers = {m["tool_call_id"]: text_of(m["content"]) for m in tool_messages(llm.requests[1])}
    slow, quick = (c["id"] for c in ask["tool_calls"])
    assert answers[quick] == "quick"
    assert answers[slow].startswith("Error:") and "1 s" in answers[slow]
    hung_pid = records(record)[0]["pid"]

    tool = {t.name: t for t in (await load_mcp(call_timeout=1.0)).tools}["rec-pid"]
    assert int(text_of(await tool.ainvoke({}))) != hung_pid, "the wedged session was dropped"
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:  # and its server process is shut down, not left behind
        try:
            os.kill(hung_pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the hung server {hung_pid} is still running")


async def test_servers_file_options_and_problems(
    llm, saver, workspace, thread, tmp_path, deploy, http_servers, http_record, monkeypatch
):
    record = tmp_path / "calls.jsonl"
    marker = tmp_path / "off-started"
    monkeypatch.setenv("WA_PARENT_MARK", "from-parent")
    config = deploy(
        {
            "rec": stdio("rec", record, anythingllm={"suppressedTools": ["secret"]}),
            "off": {
                "command": sys.executable,
                "args": ["-c", f"open({str(marker)!r}, 'w').close()"],
                "anythingllm": {"autoStart": False},
            },
            "sse": http_servers.sse(),
            "web": http_servers.http(),
            "bad": {"type": "websocket", "url": "ws://127.0.0.1:1"},
            "badurl": {"url": "htp:/nowhere"},
            "noargs": {"command": "x", "args": "--flag"},
            "empty": {},
        },
    )
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("hello"))
    out = await graph.ainvoke(user_message("hi"), thread, context=ctx(workspace))
    assert out["route"] == "agent"
    names = offered(llm.requests[0])
    assert {"rec-echo", "rec-word_count", "sse-echo", "sse-secret", "calculate"} <= set(names)
    assert "rec-secret" not in names, "suppressed tools are never offered"
    assert not any(n.startswith(("off-", "bad", "noargs", "empty")) for n in names)
    assert not marker.exists(), "autoStart false: the server was never started"

    toolset = await Services(records=MemoryRecords()).toolset(ctx(workspace))
    problems = toolset.problems
    assert len(problems) == 4, problems
    expected = {
        "'bad'": "unknown type 'websocket'",
        "'badurl'": "bad URL 'htp:/nowhere'",
        "'noargs'": '"args" must be a list',
        "'empty'": 'neither "command"',
    }
    for name, text in expected.items():
        assert any(name in p and text in p for p in problems), (name, problems)
    assert toolset.tools["rec-echo"].metadata == {"server": "rec", "tool": "echo", "mcp": True}

    # a stdio server gets the parent's environment plus its own env block; an HTTP one, its headers
    env = toolset.tools["rec-env"]
    assert text_of(await env.ainvoke({"name": "WA_PARENT_MARK"})) == "from-parent"
    assert text_of(await env.ainvoke({"name": "MCP_LABEL"})) == "rec"
    assert text_of(await toolset.tools["web-header"].ainvoke({"name": "X-T"})) == "1"
    # text content becomes the message, structured content the artifact
    call = {"name": "sse-add", "args": {"a": 2, "b": 40}, "id": "c1", "type": "tool_call"}
    message = await toolset.tools["sse-add"].ainvoke(call)
    assert (text_of(message.content), message.artifact, message.status) == (
        "42",
        {"structured_content": {"result": 42}},
        "success",
    )

    # `workspace-agent mcp` shows the same picture
    console = Console(record=True, width=200)
    assert show_mcp(str(config), console) == 1
    shown = console.export_text()
    for text in ("rec-echo", "secret (suppressed)", "not auto-started", "unknown type", "sse-echo"):
        assert text in shown, text

    # an edited file is re-read; a server whose block did not change keeps its session
    pid = int(text_of(await toolset.tools["rec-pid"].ainvoke({})))
    data = json.loads(config.read_text())
    data["mcpServers"]["rec"]["anythingllm"]["suppressedTools"] = ["secret", "echo"]
    del data["mcpServers"]["sse"]
    config.write_text(json.dumps(data))
    tools = (await Services(records=MemoryRecords()).toolset(ctx(workspace))).tools
    assert "rec-echo" not in tools and "sse-echo" not in tools and "rec-secret" not in tools
    assert int(text_of(await tools["rec-pid"].ainvoke({}))) == pid


async def test_images_and_resource_links_reach_the_model_as_text_and_the_turn_goes_on(
    llm, saver, workspace, thread, tmp_path, deploy
):
    deploy({"rec": stdio("rec", tmp_path / "calls.jsonl")})
    ask = tool_reply(("rec-picture", {}))
    llm.push(ask, text_reply("seen"))
    out = await build_graph(checkpointer=saver).ainvoke(
        user_message("show me"), thread, context=ctx(workspace, auto_approved=["rec-*"])
    )
    # langchain-openai refuses a file URL in a tool message, and a text-only model an image: both would
    # have failed the second model call, not just the tool
    assert out["stop_reason"] == "answered" and out["messages"][-1].content == "seen"
    [answer] = tool_messages(llm.requests[1])
    assert text_of(answer["content"]).split("\n") == [
        "a red dot",
        "[image content (image/png)]",
        "[resource: file:///srv/dot.png]",
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "is not valid JSON"),
        ('{"mcpServers": ["a"]}', '"mcpServers" must be an object'),
        ('["mcpServers"]', "is malformed"),
    ],
)
async def test_a_malformed_servers_file_is_one_clear_problem_and_the_turn_goes_on(
    llm, saver, workspace, thread, tmp_path, monkeypatch, content, problem
):
    config = tmp_path / "mcp.json"
    config.write_text(content)
    monkeypatch.setenv(ENV_VAR, str(config))
    toolset = await Services(records=MemoryRecords()).toolset(ctx(workspace))
    assert len(toolset.problems) == 1 and problem in toolset.problems[0]
    assert str(config) in toolset.problems[0]
    assert "calculate" in toolset.tools, "built-in tools are still offered"
    llm.push(text_reply("fine"))
    out = await build_graph(checkpointer=saver).ainvoke(user_message("hi"), thread, context=ctx(workspace))
    assert out["messages"][-1].content == "fine"


async def test_a_missing_servers_file_means_no_mcp_tools_and_no_problem(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent.json"))
    toolset = await Services(records=MemoryRecords()).toolset(Context())
    assert toolset.problems == [] and "calculate" in toolset.tools
    assert not any((t.metadata or {}).get("mcp") for t in toolset.tools.values())


async def test_a_workspace_chooses_servers_by_name_and_the_others_are_not_started(
    llm, saver, workspace, thread, tmp_path, deploy
):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    marker = tmp_path / "other-started"
    deploy(
        {
            "one": stdio("one", one),
            "two": stdio("two", two),
            "other": {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]},
        }
    )
    services = Services(records=MemoryRecords())
    toolset = await services.toolset(ctx(workspace, mcp_servers=["two", "nope"]))
    mcp = sorted(n for n, t in toolset.tools.items() if (t.metadata or {}).get("mcp"))
    assert mcp and all(n.startswith("two-") for n in mcp), mcp
    assert toolset.problems == [
        "MCP server 'nope' named in mcp_servers is not one of the deployment's servers (one, two, other)"
    ]
    assert text_of(await toolset.tools["two-echo"].ainvoke({"text": "hi"})) == "hi"
    assert [r["server"] for r in records(two)] == ["two"]
    assert not marker.exists(), "a server the workspace did not choose is never started"

    none = await services.toolset(ctx(workspace, mcp_servers=[]))
    assert not any((t.metadata or {}).get("mcp") for t in none.tools.values()) and none.problems == []
    assert not marker.exists()

    llm.push(text_reply("hello"))
    await build_graph(checkpointer=saver).ainvoke(
        user_message("hi"), thread, context=ctx(workspace, mcp_servers=["one"])
    )
    names = offered(llm.requests[0])
    assert "one-echo" in names and not any(n.startswith(("two-", "other-")) for n in names)


def test_tool_names_are_sanitised_the_same_way_every_time():
    assert tool_name("files", "echo") == "files-echo"
    assert tool_name("my server", "word.count") == "my_server-word_count"
    long_a, long_b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(long_a) == MAX_NAME and long_a != long_b
    assert long_a == tool_name("s", "x" * 80 + "a")
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in (long_a, long_b))


# ------------------------------------------------------------------------------------- the dev server


async def test_dev_server_runs_an_mcp_call_after_approval_and_resume(
    llm, dev_server, dev_mcp_config, workspace, tmp_path
):
    from langgraph_sdk import get_client

    record = tmp_path / "calls.jsonl"
    # the deployment's servers file: the dev server was started with MCP_CONFIG naming this path
    dev_mcp_config.write_text(json.dumps({"mcpServers": {"rec": stdio("rec", record)}}))
    try:
        client = get_client(url=dev_server)
        thread_id = (await client.threads.create())["thread_id"]
        # which servers a workspace uses is its assistant's setting; a run may not set it
        assistant = await client.assistants.create(
            "agent", context={"workspace": workspace, "mcp_servers": ["rec"]}
        )
        context = {"workspace": workspace}
        ask = tool_reply(("rec-echo", {"text": "via the dev server"}))
        llm.push(ask, text_reply("done through dev"))
        await client.runs.wait(
            thread_id, assistant["assistant_id"], input=user_message("go"), context=context
        )
        state = await client.threads.get_state(thread_id)
        [pending] = state["interrupts"]
        [action] = pending["value"]["action_requests"]
        assert (action["server"], action["tool"], action["args"]) == (
            "rec",
            "echo",
            {"text": "via the dev server"},
        )
        assert action["tool_call_id"] == ask["tool_calls"][0]["id"]
        assert records(record) == []

        result = await client.runs.wait(
            thread_id,
            assistant["assistant_id"],
            command={"resume": {"decisions": [{"type": "approve"}]}},
            context=context,
        )
        assert result["messages"][-1]["content"] == "done through dev"
        [call] = records(record)
        assert call["tool"] == "echo" and call["pid"] != os.getpid()
        [answer] = tool_messages(llm.requests[-1])
        assert text_of(answer["content"]) == "via the dev server"
    finally:
        dev_mcp_config.unlink(missing_ok=True)
