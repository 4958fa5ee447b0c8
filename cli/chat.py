"""The CLI's conversation: a turn streamed to the terminal, interrupts answered there, ``chat`` and ``ask``.

``main`` parses the command line and builds the context; this module runs turns of the agent graph with
it, on the PostgreSQL saver and the model the session chose (``cli.endpoint``), and answers the graph's
interrupts at the terminal: an approval card per call, or the model's own question (``ask_person``).
While a turn shows nothing yet, a status line on stderr says what it is doing (``cli.activity``).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from contextlib import AsyncExitStack
from typing import Any

from langgraph.types import Command
from rich.console import Console
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table

from ..core.context import Context
from .activity import Activity, StatusLine, is_progress
from .endpoint import Endpoint

console = Console()
err = Console(stderr=True)


def _edited_args(current: dict[str, Any]) -> dict[str, Any]:
    """New arguments typed by the person, asked again until they are a JSON object.

    A typo must not end the turn (and with it the pending approval): it is named and the person types again.
    """
    while True:
        raw = Prompt.ask("arguments as JSON", default=json.dumps(current), console=console)
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as exc:
            err.print(f"[red]not JSON ({exc}); type the arguments again[/]")
            continue
        if isinstance(args, dict):
            return args
        err.print(f"[red]the arguments must be a JSON object {{...}}, not {type(args).__name__}[/]")


def _answer_question(request: dict[str, Any]) -> dict[str, Any]:
    """Show the model's question (``ask_person``) and take the answer, one of its choices if it has some."""
    choices = request.get("choices") or None
    console.print(Panel(request["question"], title="The model asks you", border_style="cyan"))
    if choices:
        numbered = {str(i): c for i, c in enumerate(choices, start=1)}
        for key, choice in numbered.items():
            console.print(f"  {key}. {choice}", highlight=False)
        picked = Prompt.ask("your choice", choices=[*numbered, *choices], console=console)
        return {"answer": numbered.get(picked, picked)}
    return {"answer": Prompt.ask("your answer", console=console)}


def _ask_person(request: dict[str, Any]) -> dict[str, Any]:
    """Answer the interrupt at the terminal: a question of the model, or the approval cards of its calls."""
    if request.get("type") == "question":
        return _answer_question(request)
    decisions = []
    for action in request["action_requests"]:
        where = f" on MCP server [bold]{action['server']}[/]" if action.get("server") else ""
        args = json.dumps(action["args"], indent=2, ensure_ascii=False)
        body = f"[dim]{action.get('description') or ''}[/]\n\n{args}"
        console.print(
            Panel(body, title=f"Model wants to call [bold]{action['name']}[/]{where}", border_style="yellow")
        )
        choice = Prompt.ask(
            "approve / edit / reject / always",
            choices=["a", "e", "r", "always"],
            default="a",
            console=console,
        )
        decision: dict[str, Any] = {"tool_call_id": action["tool_call_id"]}
        if choice == "r":
            decision |= {"type": "reject", "message": Prompt.ask("reason", default="no", console=console)}
        elif choice == "e":
            edited = _edited_args(action["args"])
            decision |= {"type": "edit", "edited_action": {"name": action["name"], "args": edited}}
        else:
            decision |= {"type": "approve", "always_allow": choice == "always"}
        decisions.append(decision)
    return {"decisions": decisions}


#: What begins each stretch of the agent's text in the conversation.
AGENT = "[bold cyan]agent[/] "


class _TurnScreen:
    """One turn on the terminal: the answer streamed to ``out`` (``None``: not shown), the status on ``err``.

    The status line and the answer never share a line: the status is erased before text or an approval
    card is printed, and it starts on a fresh line when the answer stopped mid-line (text, then tool calls).
    """

    def __init__(self, out: Console | None, status: Console) -> None:
        self.out = out
        self.activity = Activity()
        self.status = StatusLine(status, self.activity)
        self.mid_line = False

    def take(self, mode: str, data: Any) -> Any:
        """Show one ``(mode, data)`` item of the stream; an approval request is returned, not shown."""
        if mode == "updates" and "__interrupt__" in data:
            return data["__interrupt__"][0].value
        if mode == "custom" and is_progress(data):
            self.activity.progress(data)
        elif mode == "messages":
            self._message(*data)
        elif mode == "updates":
            for node, update in data.items():
                self.activity.finished(node, update)
        if self.activity.label() is not None and not self.status.shown:
            self._end_line()
        self.status.sync()
        return None

    def pause(self) -> None:
        """Erase the status and end the answer's line: a card, an error or the person's prompt comes next."""
        self.status.clear()
        self._end_line()

    def _message(self, chunk: Any, meta: dict[str, Any]) -> None:
        """Print the model's text as it streams (not a tool's output, which is the model's to tell)."""
        if meta.get("langgraph_node") != "call_model":
            return
        self.activity.wrote(calls=bool(getattr(chunk, "tool_call_chunks", None)))
        if self.out is None or not isinstance(chunk.content, str) or not chunk.content:
            return
        self.activity.text_shown()
        self.status.clear()
        if not self.mid_line:
            self.out.print(AGENT, end="")
        self.out.print(chunk.content, end="", markup=False, highlight=False)
        self.mid_line = not chunk.content.endswith("\n")

    def _end_line(self) -> None:
        if self.out is not None and self.mid_line:
            self.out.print()
        self.mid_line = False


async def _turn(
    graph: Any, payload: Any, config: dict, context: Context, *, show: bool, approve: Any
) -> dict:
    """Run one turn to its end, streaming the answer, saying what runs meanwhile, answering approvals."""
    screen = _TurnScreen(console if show else None, err)
    try:
        while True:
            interrupted = None
            async for mode, data in graph.astream(
                payload, config, context=context, stream_mode=["messages", "updates", "custom"]
            ):
                interrupted = screen.take(mode, data) or interrupted
            screen.pause()
            if interrupted is None:
                return (await graph.aget_state(config)).values
            if interrupted.get("error"):
                err.print(f"[red]{interrupted['error']}[/]")
            payload = Command(resume=approve(interrupted))
    finally:
        screen.pause()


def _show_sources(values: dict) -> None:
    for source in values.get("sources") or []:
        console.print(
            f"[dim]source: {source.get('title') or source.get('document')} "
            f"({source.get('score', 'pinned')})[/]",
            highlight=False,
        )


def _show_decisions(values: dict) -> None:
    table = Table("id", "by", "outcome", "why", title="decisions of the last turn")
    for d in values.get("decisions") or []:
        table.add_row(d["id"], d["decided_by"], json.dumps(d["outcome"], default=str)[:60], d["why"])
    console.print(table)


async def _seed(workspace: str, user_id: str) -> None:
    """A first chat in an empty workspace gets the sample documents, so retrieval has something to show."""
    from ..providers.embeddings import EmbeddingUnavailable
    from .documents import seed_samples

    try:
        await seed_samples(workspace, err, user_id)
    except EmbeddingUnavailable as exc:
        err.print(f"[dim]no sample documents: {exc}[/]")


def _non_interactive(yes: bool):  # noqa: ANN202 - a decision function
    """``ask``'s answer to an approval card: approve all with ``--yes``, ask at a terminal, else reject."""

    def approve(request: dict) -> dict:
        if request.get("type") == "question":
            return _answer_question(request)  # ``ask`` offers the tool only at a terminal
        if yes:
            return {"decisions": [{"type": "approve"} for _ in request["action_requests"]]}
        if sys.stdin.isatty():
            return _ask_person(request)
        return {
            "decisions": [
                {"type": "reject", "message": "not approved: non-interactive (use --yes)"}
                for _ in request["action_requests"]
            ]
        }

    return approve


async def ask(graph: Any, config: dict, context: Context, question: str, *, yes: bool, as_json: bool) -> int:
    """One question, its answer printed (or the whole turn as JSON), approvals per ``--yes``.

    Without a terminal nobody can answer a question of the model, so ``ask_person`` is not offered then.
    """
    if not sys.stdin.isatty():
        context = context.model_copy(update={"clarifying_questions": False})
    payload = {"messages": [{"role": "user", "content": question}]}
    values = await _turn(graph, payload, config, context, show=False, approve=_non_interactive(yes))
    answer = values["messages"][-1].content
    if as_json:
        keys = ("route", "stop_reason", "sources", "decisions")
        print(json.dumps({k: values.get(k) for k in keys} | {"answer": answer}, default=str))
    else:
        print(answer)
    return 0


async def chat(graph: Any, config: dict, context: Context, endpoint: Endpoint) -> int:
    """The conversation loop: a banner, then turns until ``/exit``; a failed turn is reported, not fatal."""
    await _seed(context.workspace, context.user_id)
    hint = "" if context.native_tool_calling else "start a message with @agent to let the model use tools\n"
    thread = config["configurable"]["thread_id"]
    console.print(
        Panel(
            f"model: {endpoint.label}\nworkspace: {context.workspace}  thread: {thread}  "
            f"mode: {context.chat_mode}\n{hint}commands: /decisions  /exit",
            title="workspace-agent",
            border_style="cyan",
        )
    )
    values: dict = {}
    while True:
        try:
            text = Prompt.ask("[bold green]you[/]", console=console).strip()
        except (EOFError, KeyboardInterrupt):
            return 0
        if text in ("/exit", "/quit", "exit"):
            return 0
        if text == "/decisions":
            _show_decisions(values)
            continue
        if not text:
            continue
        payload = {"messages": [{"role": "user", "content": text}]}
        try:
            values = await _turn(graph, payload, config, context, show=True, approve=_ask_person)
        except Exception as exc:  # the endpoint's or database's message; the next turn may well work
            err.print(f"[red]error:[/] {exc}")
            continue
        _show_sources(values)
        if values.get("stop_reason") not in (None, "answered"):
            console.print(f"[dim]({values['stop_reason']})[/]")


async def session(args: argparse.Namespace, endpoint: Endpoint, context: Context) -> int:
    """``chat`` or ``ask`` on the PostgreSQL saver (pool-backed: a database restart costs one retry).

    The graph is built for the session's model (``endpoint.settings``), as the context was.
    """
    from ..checkpoints.savers import postgres_saver
    from ..graphs.agent import build_graph

    config = {"configurable": {"thread_id": args.thread or uuid.uuid4().hex}}
    async with AsyncExitStack() as stack:
        with err.status("starting the database…"):
            saver = await stack.enter_async_context(postgres_saver())
        graph = build_graph(checkpointer=saver, settings=endpoint.settings)
        if args.command == "ask":
            return await ask(graph, config, context, args.question, yes=args.yes, as_json=args.json)
        return await chat(graph, config, context, endpoint)
