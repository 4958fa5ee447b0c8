"""The CLI says what a turn is doing while nothing shows yet, with the seconds counting, and erases it.

A small graph of our own stands in for the agent: its ``call_model`` and ``execute_tool`` nodes emit the
agent graph's progress events (``reading``, ``writing``, ``tool``) and sleep, as a slow local model and
slow tools would. The terminal is a recording console (both streams, and what a person would see on the
screen where they meet), so the tests read the status lines drawn and the answer printed. The last test
goes through the agent graph itself and the scripted server, which holds its reply back as a model reads.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send, interrupt
from rich.console import Console

from tests.support.helpers import user_message
from tests.support.tools import make_test_tools
from workspace_agent.cli import chat
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply

ANSWER = "The tool answered: 20"
READING = 1.6  # long enough for the status to count a second while the model "reads"
TOOLS = {"current_datetime": 1.6, "search_documents": 0.2}  # run side by side; one ends much sooner
LABEL = re.compile(r"((?:reading the prompt|writing(?: tool calls)?|running [^…]+)… \d+ s)")


class TurnState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class CallState(TypedDict):
    call: dict[str, Any]


async def call_model(state: TurnState) -> dict:
    """Read slowly, then write tool calls (nothing streams) or, after the tools, a streamed answer."""
    write = get_stream_writer()
    write({"progress": "reading"})
    await asyncio.sleep(READING)
    write({"progress": "writing"})
    if not any(isinstance(m, ToolMessage) for m in state["messages"]):
        await asyncio.sleep(0.3)
        calls = [{"name": name, "args": {}, "id": f"call-{name}"} for name in TOOLS]
        return {"messages": [AIMessage("", tool_calls=calls)]}
    model = GenericFakeChatModel(messages=iter([AIMessage(ANSWER)]))  # streams word by word
    return {"messages": [await model.ainvoke(state["messages"])]}


def approve(state: TurnState) -> dict:
    calls = state["messages"][-1].tool_calls
    interrupt({"action_requests": [{"name": c["name"], "args": c["args"]} for c in calls]})
    return {}


def after_model(state: TurnState) -> str:
    return "approve" if state["messages"][-1].tool_calls else END


def run_calls(state: TurnState) -> list[Send]:
    return [Send("execute_tool", {"call": call}) for call in state["messages"][-1].tool_calls]


async def execute_tool(state: CallState) -> dict:
    call = state["call"]
    get_stream_writer()({"progress": "tool", "name": call["name"]})
    get_stream_writer()({"rows": 3})  # a tool's own custom data is not a progress event
    await asyncio.sleep(TOOLS[call["name"]])
    return {"messages": [ToolMessage("20", tool_call_id=call["id"], name=call["name"])]}


def slow_graph() -> Any:
    builder = StateGraph(TurnState)
    builder.add_node("call_model", call_model)
    builder.add_node("approve", approve)
    builder.add_node("execute_tool", execute_tool)
    builder.add_edge(START, "call_model")
    builder.add_conditional_edges("call_model", after_model, ["approve", END])
    builder.add_conditional_edges("approve", run_calls, ["execute_tool"])
    builder.add_edge("execute_tool", "call_model")
    return builder.compile(checkpointer=InMemorySaver())


class Tee(io.StringIO):
    """One stream of the terminal: kept apart, and written to the screen it shares with the other."""

    def __init__(self, screen: io.StringIO) -> None:
        super().__init__()
        self.screen = screen

    def write(self, text: str) -> int:
        self.screen.write(text)
        return super().write(text)


class Terminal:
    """Two consoles (stdout, stderr) on one recorded screen, as in a terminal, each stream also kept apart."""

    def __init__(self, *, tty: bool = True) -> None:
        self.screen = io.StringIO()
        self.streams = {name: Tee(self.screen) for name in ("out", "err")}
        self.consoles = {
            name: Console(file=stream, force_terminal=tty or None, width=100, color_system=None)
            for name, stream in self.streams.items()
        }

    def attach(self, monkeypatch: pytest.MonkeyPatch) -> Terminal:
        """Make the CLI print to this terminal: the answer to ``out``, status and errors to ``err``."""
        monkeypatch.setattr(chat, "console", self.consoles["out"])
        monkeypatch.setattr(chat, "err", self.consoles["err"])
        return self

    def labels(self, name: str = "err") -> list[str]:
        """Every status line drawn on a stream, in order, repeats dropped."""
        found = LABEL.findall(self.streams[name].getvalue())
        return [label for i, label in enumerate(found) if i == 0 or found[i - 1] != label]

    def visible(self) -> list[str]:
        """The screen's lines as a person sees them now: carriage returns, erased lines and moves applied."""
        lines, row, col = [""], 0, 0
        for params, code, char in re.findall(r"\x1b\[([?\d;]*)([A-Za-z])|(.|\n)", self.screen.getvalue()):
            if code == "K":
                lines[row] = ""
            elif code == "A":
                row = max(row - int(params or 1), 0)
            elif char == "\r":
                col = 0
            elif char == "\n":
                row, col = row + 1, 0
                lines.extend([""] * (row + 1 - len(lines)))
            elif char and not code:
                line = lines[row].ljust(col)
                lines[row], col = line[:col] + char + line[col + 1 :], col + 1
        return [line.rstrip() for line in lines if line.strip()]


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    return Terminal().attach(monkeypatch)


def config() -> dict:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


async def test_chat_shows_each_phase_with_its_seconds_and_erases_it_before_the_answer(terminal):
    seen_at_approval: list[list[str]] = []

    def approve_all(request: dict) -> dict:
        seen_at_approval.append(terminal.visible())
        return {"decisions": [{"type": "approve"} for _ in request["action_requests"]]}

    payload = {"messages": [{"role": "user", "content": "what time is it?"}]}
    values = await chat._turn(slow_graph(), payload, config(), Context(), show=True, approve=approve_all)

    assert values["messages"][-1].content == ANSWER
    labels = terminal.labels()
    assert labels[:2] == ["reading the prompt… 0 s", "reading the prompt… 1 s"], labels  # counted live
    assert "writing… 0 s" in labels
    both = [label for label in labels if "current_datetime" in label and "search_documents" in label]
    assert both and both[0].endswith("… 0 s"), labels  # calls running side by side are all named
    assert "running current_datetime… 1 s" in labels  # the quick one ended; the slow one still counts
    assert labels.index("running current_datetime… 1 s") < labels.index("reading the prompt… 1 s", 2)
    assert seen_at_approval == [[]], "the status is erased before an approval card"
    assert terminal.streams["out"].getvalue() == f"agent {ANSWER}\n", "the answer holds no status"
    assert terminal.visible() == [f"agent {ANSWER}"], "nothing of the status stays on the screen"


async def test_chat_status_starts_below_text_the_model_wrote_before_its_tool_calls(terminal):
    screen = chat._TurnScreen(chat.console, chat.err)
    screen.take("custom", {"progress": "reading"})  # a native call streams its tokens with no "writing"
    assert terminal.visible()[0].endswith(" reading the prompt… 0 s")
    screen.take("messages", (AIMessageChunk("Let me look."), {"langgraph_node": "call_model"}))
    assert not screen.status.shown, "the text says enough while it streams"
    call = tool_call_chunk(name="current_datetime", args="", id="c1", index=0)
    screen.take("messages", (AIMessageChunk("", tool_call_chunks=[call]), {"langgraph_node": "call_model"}))
    assert screen.status.shown
    text, status = terminal.visible()
    assert text == "agent Let me look." and status.endswith(" writing tool calls… 0 s")
    screen.take("updates", {"call_model": {}})
    assert not screen.status.shown
    assert terminal.visible() == ["agent Let me look."]


@pytest.mark.parametrize("tty", [True, False], ids=["stderr-terminal", "stderr-piped"])
async def test_ask_json_stays_clean_and_progress_goes_to_stderr_only(monkeypatch, capsys, tty):
    term = Terminal(tty=tty).attach(monkeypatch)

    code = await chat.ask(slow_graph(), config(), Context(), "what time is it?", yes=True, as_json=True)

    assert code == 0
    assert json.loads(capsys.readouterr().out)["answer"] == ANSWER
    assert term.streams["out"].getvalue() == ""
    if tty:  # a person waiting at a terminal is told; the answer is not streamed, so "writing" shows too
        expected = {"reading the prompt… 1 s", "writing… 0 s", "running current_datetime… 1 s"}
        assert expected <= set(term.labels())
    else:
        assert term.streams["err"].getvalue() == "", "a script's stderr gets no spinner frames"


async def test_through_the_agent_graph_the_cli_says_the_model_reads_writes_calls_and_runs_them(
    llm, saver, workspace, thread, terminal
):
    graph = build_graph(checkpointer=saver, tools=make_test_tools())
    asked = tool_reply(("slow", {"seconds": 1.6, "label": "x"}))
    llm.push({**asked, "delay": 1.6}, text_reply("all done"))  # the model "reads" 1.6 s before it answers
    context = Context(workspace=workspace, auto_approved=["*"])

    values = await chat._turn(graph, user_message("go"), thread, context, show=True, approve=None)

    assert values["stop_reason"] == "answered"
    labels = terminal.labels()
    expected = {
        "reading the prompt… 0 s",
        "reading the prompt… 1 s",
        "writing tool calls… 0 s",
        "running slow… 1 s",
    }
    assert expected <= set(labels), labels
    assert terminal.streams["out"].getvalue() == "agent all done\n"
    assert terminal.visible() == ["agent all done"]
