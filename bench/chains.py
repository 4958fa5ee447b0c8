"""Chains of dependent tool calls through the real agent graph, on the embedded local model.

Each task needs two or three calls where a later one uses an earlier one's result: look a price up in the
sample documents, then calculate; read the clock, then save a note; calculate, then calculate again. Each
runs as one ``@agent`` turn in a fresh thread of the real graph (``build_graph`` on the project's PostgreSQL
saver, the built-in tools, the sample workspace), with every approval granted, and is checked objectively:
the number in the final answer, or the text of the note it saved (read back from the ``notes`` table).

The model is served by an llama.cpp server of this process (as ``bench/bfcl.py`` does), reached as an
OpenAI-compatible endpoint with the embedded model's facts (prompted calls, the call grammar, 4096 tokens),
so the checkout's shared model server and whoever uses it are left alone.

Per model and split it prints tasks done, tool calls and tool rounds (model calls that asked for tools) per
task, seconds per task and prompt tokens the server read per task, and as the baseline of the same run the
seconds of a plain one-call task (``@agent What is 12*34?`` and the like, after an untimed warm-up turn),
run before the tasks and after every four (``--baseline-every``): each task is set against the two around
it, as the machine's load drifts, and the ratios are averaged. The tasks come in pairs of one kind; the
first of each pair is ``tune``, the second ``held-out``; ``fresh`` holds eight more, one per kind, written
once the held-out half had been read and left unrun until the tuning they test was done; ``unseen`` eight
more, written once ``fresh`` had been read; ``blind`` eight more, written once ``unseen`` had been read;
``sealed`` eight more, written once ``blind`` had been read; ``final`` eight more, once ``sealed`` had;
``last`` eight more, once ``final`` had; ``coda`` eight more, once ``last`` had; ``encore``
eight more, once ``coda`` had; ``person`` eight more and ``single`` eight one-step-or-none questions (a sum,
the weekday, a document fact, general knowledge), both written for the strict reading before the change they
measure; ``plain`` and ``brief`` the same again, written before the turn's tools were chosen by relevance;
``morrow`` and ``nudge`` the same again, written in stop 48 before its change.

Each task is read twice. ``done`` is the check alone (the number in the answer, the note). ``strict`` is how a
person reads the turn (``strict_faults``): done, and no figure but the question's and the task's own, no call
JSON or results digest in what is shown, no write the question did not ask for, no tool the task does not
need. The strict figure is the one to quote; tasks written before it judge leaks, writes and tools only.
Per-task details go to a JSONL file under the data folder (``--rescore FILE`` checks one again).

Run: ``python bench/chains.py --model 0.5b --split tune`` (``--limit 3`` for a quick look, ``--history``
for a thread that holds two earlier chat exchanges, ``--model 0.5b,1.5b`` for both in one run, ``--results
digest|messages`` for how the model reads a round's results).
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import re
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import httpx
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from rich.console import Console

from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.checkpoints.db import run
from workspace_agent.checkpoints.savers import postgres_saver
from workspace_agent.core.context import Context
from workspace_agent.core.conversation import message_text
from workspace_agent.core.figures import PROMPT_ASKS
from workspace_agent.core.prompts import LOOP_WRITE, STRAY_WRITE
from workspace_agent.core.settings import context_size
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.services import Services
from workspace_agent.providers.local.local_model import LocalModelServer
from workspace_agent.providers.paths import data_home
from workspace_agent.providers.prompted import rules
from workspace_agent.providers.prompted.catalog import catalog

os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("MODEL_TIMEOUT", "900")  # a slow reply on a loaded machine is not a failed task
WORKSPACE = "bench-chains"
USER = f"bench-{uuid.uuid4().hex[:8]}"  # this run's own: notes other runs save at the same time are not ours
#: The one-call tasks of the baseline: the warm-up's, then one before the tasks and one after every few. Each
#: asks another product, so llama.cpp's in-memory prompt cache cannot serve a repeated prompt whole.
BASELINE = [
    (17, 19),
    (12, 34),
    (23, 47),
    (31, 29),
    (46, 13),
    (52, 27),
    (38, 61),
    (44, 44),
    (29, 57),
    (63, 18),
]
#: Two short, unrelated chat exchanges put before a task with ``--history``.
HISTORY = [
    "Hello! In one short sentence: what colour is a clear daytime sky?",
    "Thanks. In one short sentence: name a fruit that is yellow.",
]
RESULTS_HELP = "how the model reads a round's results (providers.prompted.RESULTS_AS; default: the code's)"
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


# --- the model under test -------------------------------------------------------------------------------


class ModelUnderTest:
    """A pinned local model served by this process, set as the graph's OpenAI-compatible endpoint.

    The environment then says what ``providers.chat.endpoint`` says of the embedded model: tools are prompted,
    the call grammar is sent, the window is the server's. ``/metrics`` counts the prompt tokens it read.
    """

    def __init__(self, short: str) -> None:
        self.short = short
        os.environ["LOCAL_MODEL"] = short  # resolve_model_path picks (and if needed assembles) this pin
        self.server = LocalModelServer(n_ctx=context_size()).start()
        os.environ.update(
            OPENAI_BASE_URL=self.server.base_url,
            OPENAI_API_KEY="local",
            CHAT_MODEL=self.server.model_name,
            NATIVE_TOOL_CALLING="false",
            CALL_GRAMMAR="true",
            CONTEXT_WINDOW=str(self.server.n_ctx),
        )
        self.metrics_url = self.server.base_url.removesuffix("/v1") + "/metrics"

    @property
    def name(self) -> str:
        """The served model's name."""
        return self.server.model_name

    async def counters(self) -> dict[str, float]:
        """llama.cpp's running totals: prompt tokens read and taken from the cache, seconds, tokens written.

        Only this process uses the server, so the difference of two readings is what happened between.
        """
        async with httpx.AsyncClient(timeout=30) as client:
            text = (await client.get(self.metrics_url)).text
        wanted = {
            "llamacpp:prompt_tokens_total": "read",
            "llamacpp:prompt_tokens_cached_total": "cached",
            "llamacpp:prompt_seconds_total": "prompt_s",
            "llamacpp:tokens_predicted_total": "written",
            "llamacpp:tokens_predicted_seconds_total": "written_s",
        }
        found = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in wanted:
                found[wanted[name]] = float(value)
        return found

    async def tokens(self, text: str) -> int:
        """How many tokens the served model reads ``text`` as (its own tokenizer, ``/tokenize``)."""
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(
                self.metrics_url.removesuffix("/metrics") + "/tokenize", json={"content": text}
            )
        return len(reply.json()["tokens"])

    def stop(self) -> None:
        """Free the model's memory."""
        self.server.stop()


@contextmanager
def served(short: str) -> Iterator[ModelUnderTest]:
    """A pinned model (``0.5b`` or ``1.5b``) served for the length of a ``with`` block."""
    model = ModelUnderTest(short)
    try:
        print(f"model {model.name} ({model.server.n_threads} threads)", flush=True)
        yield model
    finally:
        model.stop()


@dataclass
class Session:
    """The project's PostgreSQL saver, the graph of the model under test, and the JSONL details file."""

    saver: Any
    sink: TextIO
    path: Path
    graph: Any = None

    def for_model(self) -> None:
        """A graph for the model just served, built after ``ModelUnderTest`` set the endpoint.

        The endpoint is read when the graph is built (since 65d0424): one built before used the checkout's
        shared model server, the default pin whatever ``--model`` said (``warm_up`` now catches that).
        """
        self.graph = build_graph(checkpointer=self.saver)

    def write(self, record: dict[str, Any]) -> None:
        """One line of details, written at once (a run stopped half-way keeps what it measured)."""
        self.sink.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.sink.flush()


@asynccontextmanager
async def session(name: str, out: str | None) -> AsyncIterator[Session]:
    """The seeded bench workspace, the graph and a details file (default: ``<data>/bench/<name>-<time>``)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(out or data_home() / "bench" / f"{name}-{stamp}.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    await seed()
    print(f"load average {os.getloadavg()[0]:.1f}; details in {path}", flush=True)
    async with postgres_saver() as saver:
        with path.open("a", encoding="utf-8") as sink:  # noqa: ASYNC230 - a bench, one writer, line by line
            yield Session(saver, sink, path)


async def warm_up(model: ModelUnderTest, turns: Awaitable[Any]) -> None:
    """Run the untimed warm-up ``turns``; stop the bench if they did not reach the served model.

    A graph that went elsewhere (the checkout's shared server) would have every figure measured there.
    """
    before = await model.counters()
    await turns
    if not difference(await model.counters(), before).get("written"):
        raise SystemExit(f"the warm-up did not reach the served {model.short}: nothing measured")


def results_as(choice: str | None) -> str:
    """How the prompted model reads a round's results; ``choice`` sets ``prompted.RESULTS_AS`` first.

    ``digest`` folds them into the user message as plain text, ``messages`` gives the calls and tool messages
    as the chat template renders them. Code without the setting has the digest only.
    """
    from workspace_agent.providers import prompted

    if choice is not None:
        if not hasattr(prompted, "RESULTS_AS"):
            raise SystemExit("--results: this code's providers.prompted has no RESULTS_AS (the digest only)")
        prompted.RESULTS_AS = choice  # type: ignore[attr-defined]
    return str(getattr(prompted, "RESULTS_AS", "digest"))


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """What the server did between two readings of its counters."""
    return {k: round(after.get(k, 0.0) - before.get(k, 0.0), 3) for k in after}


def bench_context(workspace: str = WORKSPACE, **overrides: Any) -> Context:
    """The bench workspace's settings: prompted calls (the local model's), no MCP servers, a bench user."""
    return Context(workspace=workspace, user_id=USER, native_tool_calling=False, mcp_servers=[], **overrides)


async def seed() -> None:
    """Fill the bench user's workspace with the sample documents, as the CLI's first chat does.

    Workspaces are per user: seeded for another user (the local one), they are not the bench user's, and
    every document task would search an empty workspace (as they did from issue 19 until this was seen).
    """
    from workspace_agent.cli.documents import seed_samples

    await seed_samples(WORKSPACE, Console(stderr=True), user_id=USER)


# --- one turn -------------------------------------------------------------------------------------------


#: What the bench's person says when the model asks a question (``ask_person``): no task leaves one open.
NO_ANSWER = "Use your best judgement; I have nothing to add."


def approve_all(request: dict[str, Any]) -> dict[str, Any]:
    """The resume that approves every pending action request."""
    return {"decisions": [{"type": "approve"} for _ in request.get("action_requests", [])]}


async def plain_turn(graph: Any, text: str, config: dict, context: Context) -> tuple[dict, int]:
    """Run one turn to its end, approving every request; the final values and the approvals granted."""
    payload: Any = {"messages": [{"role": "user", "content": text}]}
    approvals = 0
    while True:
        out = await graph.ainvoke(payload, config, context=context)
        if "__interrupt__" not in out:
            return out, approvals
        request = out["__interrupt__"][0].value
        if request.get("type") == "question":  # no task needs one: answered, and read as an unneeded tool
            payload = Command(resume={"answer": NO_ANSWER})
            continue
        approvals += len(request.get("action_requests", []))
        payload = Command(resume=approve_all(request))


def this_turn(messages: list[BaseMessage], text: str) -> list[BaseMessage]:
    """The running turn's messages: from its user message (the last one carrying ``text``) on."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and text in str(m.content)]
    return messages[starts[-1] :] if starts else messages


# --- tasks and their checks -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a task's turn left: the answer, the notes it saved, the clock around it."""

    answer: str
    notes: list[str]
    started: datetime
    ended: datetime
    earlier: list[str] = field(default_factory=list)  # the thread's earlier exchanges' answers (--history)


Check = Callable[[Outcome], bool]


#: Dates and times of day, whose parts are not answers: "00:31" holds no 31 minutes since midnight.
CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:[+-]\d{2}:?\d{2}|Z)?)?|\d{1,2}:\d{2}(?::\d{2})?"
)


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` outside dates and times (``2,160`` and ``2160.0`` read as 2160)."""
    found = []
    for raw in re.findall(r"-?\d[\d,]*(?:\.\d+)?", CLOCK.sub(" ", text)):
        try:
            found.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


#: Small whole numbers and round tens as a person writes them in a sentence ("after three failed attempts",
#: "half of a hundred is fifty").
NUMBER_WORDS = dict(
    enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
) | {30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety"}


def says(value: float | Callable[[Outcome], set[float]], where: str = "answer") -> Check:
    """The answer (or a saved note) writes this number (or one of the numbers a function of the clock).

    A small whole number may be written as a word, as a person reads "three" as 3.
    """

    def check(outcome: Outcome) -> bool:
        wanted = value(outcome) if callable(value) else {float(value)}
        texts = [outcome.answer] if where == "answer" else outcome.notes
        if any(abs(n - w) < 1e-6 for t in texts for n in numbers(t) for w in wanted):
            return True
        words = {NUMBER_WORDS[int(w)] for w in wanted if w == int(w) and int(w) in NUMBER_WORDS}
        return any(re.search(rf"\b{word}\b", t, re.IGNORECASE) for t in texts for word in words)

    return check


def note_says(value: float) -> Check:
    """A note saved during the task writes this number."""
    return says(value, where="note")


def dates_of(outcome: Outcome) -> set[str]:
    """Ways to write the task's date (the day it started or ended, in case midnight fell in between)."""
    written = set()
    for day in {outcome.started.date(), outcome.ended.date()}:
        month = day.strftime("%B")
        written |= {
            day.isoformat(),
            f"{month} {day.day}, {day.year}",
            f"{month} {day.day} {day.year}",
            f"{day.day} {month} {day.year}",
            day.strftime("%d/%m/%Y"),
            day.strftime("%m/%d/%Y"),
        }
    return written


def note_with_date(outcome: Outcome) -> bool:
    """A note names today's date."""
    return any(d.lower() in n.lower() for n in outcome.notes for d in dates_of(outcome))


def names_only(text: str, names: Sequence[str], allowed: set[str]) -> bool:
    """The text names one of ``names`` (case ignored), and only ones in ``allowed``."""
    named = {n for n in names if n.lower() in text.lower()}
    return bool(named) and named <= allowed


def weekdays_of(outcome: Outcome) -> set[str]:
    """The task's weekday (both, if midnight fell in between)."""
    return {WEEKDAYS[outcome.started.weekday()], WEEKDAYS[outcome.ended.weekday()]}


def months_of(outcome: Outcome) -> set[str]:
    """The task's month (both, if a month ended in between)."""
    return {outcome.started.strftime("%B"), outcome.ended.strftime("%B")}


def note_with_weekday(outcome: Outcome) -> bool:
    """A note names today's weekday and no other."""
    return any(names_only(note, WEEKDAYS, weekdays_of(outcome)) for note in outcome.notes)


def note_with_month(outcome: Outcome) -> bool:
    """A note names this month and no other."""
    return any(names_only(note, calendar.month_name[1:], months_of(outcome)) for note in outcome.notes)


def minutes_since_midnight(outcome: Outcome) -> set[float]:
    """The minutes since midnight at any moment of the task."""
    moment, found = outcome.started, set()
    while moment <= outcome.ended + timedelta(minutes=1):
        found.add(float(moment.hour * 60 + moment.minute))
        moment += timedelta(minutes=1)
    return found


def this_year(outcome: Outcome) -> set[float]:
    """The year of the task (both, if New Year fell in between)."""
    return {float(outcome.started.year), float(outcome.ended.year)}


def years_since_1990(outcome: Outcome) -> set[float]:
    """The years from 1990 to this one."""
    return {year - 1990 for year in this_year(outcome)}


def days_left_in_month(outcome: Outcome) -> set[float]:
    """The days from the task's date to the last of its month."""
    return {
        float(calendar.monthrange(day.year, day.month)[1] - day.day)
        for day in {outcome.started.date(), outcome.ended.date()}
    }


def month_end_figures(outcome: Outcome) -> set[float]:
    """The clock's figures, the days left in the month and the month's last day."""
    days = {outcome.started.date(), outcome.ended.date()}
    ends = {float(calendar.monthrange(d.year, d.month)[1]) for d in days}
    return clock_figures(outcome) | days_left_in_month(outcome) | ends


@dataclass(frozen=True)
class Task:
    """One chain: what the person asks, which calls it takes, and how its outcome is checked.

    ``figures`` are the numbers of the task's own a strict reader accepts besides the question's: the fact it
    had to find and the result (a function of the outcome for the clock's). Tasks written before the strict
    reading leave it ``None``: their figures are not judged, only leaks, writes and tools.
    """

    id: str
    kind: str
    prompt: str
    check: Check
    expected: str
    figures: set[float] | Callable[[Outcome], set[float]] | None = None
    bare: bool = False  # asked in a workspace of its own with no documents, as the dev server's ``default``


# --- the strict reading: the answer as a person reads it -------------------------------------------------

#: The tool each part of a task's kind may use; a ``none`` task needs no tool at all.
KIND_TOOLS = {
    "documents": {"search_documents"},
    "calculate": {"calculate"},
    "datetime": {"current_datetime"},
    "note": {"save_note"},
    "none": set(),
}
#: Tools that change something: run or proposed, each is a write the question must have asked for.
WRITE_TOOLS = {"save_note", "save_to_workspace"}
#: What only the machinery writes: a call's JSON, a code fence, a results digest line, the note on a repeat,
#: a document text's delimiter ("[END CONTEXT 3]") or header, a search passage's score or the digest's note
#: on a passage given twice; and a clause of the loop's own asks to the model (``PROMPT_ASKS``, the
#: product's list of them: a note of "Check every part of the question ..." was read as no fault before).
MACHINERY = re.compile(
    r'\{\s*"(?:name|arguments|tool)"\s*:|```|\b[a-z_]+\(\{.*?\}\) returned\b|^- [a-z_]+\(|'
    r"This call already ran in this turn|\[(?:END )?CONTEXT \d+\]|\(similarity [\d.]+\)|"
    r"the same passage as in the context above|</?document_metadata>|^sourceDocument:",
    re.M,
)
#: A date written out ("December 4, 2026", "4 December 2026"): its numbers are the clock's, not figures.
WRITTEN_DATE = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r"\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b|\b\d{1,2}\s+(?:January|February|March|April|May|June|July|"
    r"August|September|October|November|December)\s+\d{4}\b"
)


#: A numbered list's marker at the start of a line ("1. From the context, ..."): an order, not a figure.
LIST_MARKER = re.compile(r"^\s*\d+[.)]\s", re.M)


#: A saved note's number as an answer names it ("saved the note with the ID 62", "note #62"): a name, not a
#: figure. The notes table numbers them across runs, so before this was read as a name a note task passed or
#: failed by how many notes the bench's database held (34 passed as a minute of the clock, 62 did not).
NOTE_ID = re.compile(r"\b(?:note|id)\s+(?:(?:is|number)\s+)?#?\d+|\bnote\s*#\d+", re.IGNORECASE)


def figures_of(text: str) -> list[float]:
    """The figures a person reads in ``text``: its numbers but dates, times, list markers and note numbers."""
    return numbers(NOTE_ID.sub(" ", LIST_MARKER.sub(" ", WRITTEN_DATE.sub(" ", text))))


def strict_faults(task: Task, outcome: Outcome, calls: list[dict[str, Any]]) -> list[str]:
    """What a person reading the turn would hold against it, besides a wrong result (empty: none).

    - a figure in the answer or a note that is neither the question's nor the task's own;
    - call JSON, a code fence, a results digest or the loop's own asks in the answer, a note or a write
      that reached a card (one G3 sent back reached none);
    - a write (run or proposed) the question did not ask for;
    - a tool the task does not need;
    - with ``--history``, an answer or note that takes up an earlier exchange: quotes its question, or says
      again what it answered ("A yellow fruit is an apple." for "put today's weekday in a note", which the
      other checks let through, having no figure to read).
    """
    faults = []
    if any(earlier_taken_up(text, outcome.earlier) for text in [outcome.answer, *outcome.notes]):
        faults.append("earlier exchange taken up")
    if task.figures is not None:
        own = task.figures(outcome) if callable(task.figures) else task.figures
        allowed = {*figures_of(task.prompt), *own}
        for text in [outcome.answer, *outcome.notes]:
            stray = [n for n in figures_of(text) if not any(abs(n - a) < 1e-6 for a in allowed)]
            if stray:
                faults.append(f"figure {stray[0]:g} is not the task's")
                break
    written = [str(c["args"]) for c in calls if c["name"] in WRITE_TOOLS and c.get("status") != "sent back"]
    shown = [outcome.answer, *outcome.notes, *written]
    if any(MACHINERY.search(text) or PROMPT_ASKS.search(text) for text in shown if text):
        faults.append("machinery shown")
    needed = set().union(*(KIND_TOOLS.get(part, set()) for part in task.kind.split(">")))
    unasked = sorted({c["name"] for c in calls if c["name"] in WRITE_TOOLS} - needed)
    if unasked:
        faults.append(f"unasked write {', '.join(unasked)}")
    extra = sorted({c["name"] for c in calls} - needed - WRITE_TOOLS)
    if extra:
        faults.append(f"unneeded tool {', '.join(extra)}")
    return faults


def sent_back(result: ToolMessage) -> str | None:
    """``"sent back"`` for a write G3 answered before any card or run (its figures, the loop's words)."""
    return "sent back" if message_text(result).startswith((STRAY_WRITE, LOOP_WRITE)) else None


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def earlier_taken_up(text: str, answers: list[str]) -> bool:
    """Whether ``text`` quotes a ``HISTORY`` question, or has a sentence of only an earlier answer's words.

    A sentence counts from four words on, so "Yes." or "Done." is never read as one taken up.
    """
    asked = [_words(q.rsplit(":", 1)[-1]) for q in HISTORY]
    words = _words(text)
    if any(q and " ".join(q) in " ".join(words) for q in asked):
        return True
    said = [set(_words(a)) for a in answers]
    sentences = [_words(s) for s in re.split(r"[.!?\n]+", text)]
    return any(len(s) >= 4 and any(set(s) <= a for a in said) for s in sentences)


def weekday_named(outcome: Outcome) -> bool:
    """The answer names today's weekday and no other."""
    return names_only(outcome.answer, WEEKDAYS, weekdays_of(outcome))


def date_said(outcome: Outcome) -> bool:
    """The answer writes today's date."""
    return any(d.lower() in outcome.answer.lower() for d in dates_of(outcome))


def month_named(outcome: Outcome) -> bool:
    """The answer names this month and no other."""
    return names_only(outcome.answer, calendar.month_name[1:], months_of(outcome))


def mentions(*words: str) -> Check:
    """The answer holds each of these words (case ignored)."""
    return lambda outcome: all(w.lower() in outcome.answer.lower() for w in words)


def no_guess(*given: float) -> Check:
    """An answer stating no figure but the question's (``given``): what a task no source answers expects."""

    def check(outcome: Outcome) -> bool:
        stated = figures_of(outcome.answer)
        return bool(outcome.answer.strip()) and all(any(abs(n - g) < 1e-6 for g in given) for n in stated)

    return check


def clock_figures(outcome: Outcome) -> set[float]:
    """The numbers the clock gives during the task: the year, the day of the month, hours and minutes."""
    found = this_year(outcome) | {float(outcome.started.day), float(outcome.ended.day)}
    return found | minutes_since_midnight(outcome) | {float(n) for n in range(60)}


TASKS = [
    # documents, then calculate (the price or figure is in samples/workspace)
    Task("team-x3", "documents>calculate",
         "@agent What would 3 installations of the Lanternfish Team plan cost per month in total?",
         says(36), "36 (3 x 12 EUR)"),
    Task("business-x4", "documents>calculate",
         "@agent How much do 4 installations of the Lanternfish Business plan cost per month altogether?",
         says(196), "196 (4 x 49 EUR)"),
    Task("reset-seconds", "documents>calculate",
         "@agent For how many seconds is Lanternfish's password reset link valid?",
         says(900), "900 (15 minutes)"),
    Task("retention-hours", "documents>calculate",
         "@agent Lanternfish deletes old check results after some days. How many hours is that?",
         says(2160), "2160 (90 days)"),
    # the clock, then a note
    Task("date-note", "datetime>note", "@agent Save a note with today's date in it.",
         note_with_date, "a note with today's date"),
    Task("weekday-note", "datetime>note", "@agent Save a note saying which weekday it is today.",
         note_with_weekday, "a note naming today's weekday"),
    # calculate, then a note
    Task("product-note", "calculate>note", "@agent Compute 37*43 and save the result as a note.",
         note_says(1591), "a note with 1591"),
    Task("sum-note", "calculate>note", "@agent Calculate 125 * 8 + 7 and save a note with the result.",
         note_says(1007), "a note with 1007"),
    # calculate, then calculate with the first result
    Task("add-after", "calculate>calculate", "@agent Compute 17*23, then add 100 to that result.",
         says(491), "491"),
    Task("divide-after", "calculate>calculate", "@agent What is 2**10? Then divide that result by 8.",
         says(128), "128"),
    # the clock, then calculate
    Task("minutes-today", "datetime>calculate",
         "@agent What time is it now, and how many minutes have passed since midnight?",
         says(minutes_since_midnight), "hour*60+minute of now"),
    Task("years-since", "datetime>calculate",
         "@agent What is the current date, and how many years lie between 1990 and the current year?",
         says(years_since_1990), "this year - 1990"),
    # documents, then a note
    Task("port-note", "documents>note",
         "@agent Find the port Lanternfish's web interface listens on and save it as a note.",
         note_says(8640), "a note with 8640"),
    Task("memory-note", "documents>note",
         "@agent Look up how much memory Lanternfish needs for up to 200 checks and save that as a note.",
         note_says(512), "a note with 512"),
    # documents, then calculate, then a note: three dependent calls
    Task("business-6m-note", "documents>calculate>note",
         "@agent Look up the monthly price of the Lanternfish Business plan, calculate what 6 months cost, "
         "and save the result as a note.",
         note_says(294), "a note with 294 (6 x 49)"),
    Task("team-checks-note", "documents>calculate>note",
         "@agent Find how many checks the Lanternfish Team plan includes, multiply that by 2, and save the "
         "result as a note.",
         note_says(500), "a note with 500 (2 x 250)"),
]  # fmt: skip


#: Written before the session that tuned on ``held-out`` failures (the held-out half had by then been read),
#: and run only once the tuning was done: the untouched half. One per kind, the same checks.
FRESH = [
    Task("business-5y", "documents>calculate",
         "@agent What do 5 installations of the Lanternfish Business plan cost per year when paid yearly?",
         says(2450), "2450 (5 x 490 EUR)"),
    Task("pause-seconds", "documents>calculate",
         "@agent Lanternfish pauses alerts for a while when most checks fail together. How many seconds "
         "is that pause?",
         says(600), "600 (10 minutes)"),
    Task("year-note", "datetime>note", "@agent Save a note that says which year it is now.",
         says(this_year, where="note"), "a note with this year"),
    Task("work-note", "calculate>note", "@agent Work out 58*17 and store the answer in a note.",
         note_says(986), "a note with 986"),
    Task("subtract-after", "calculate>calculate",
         "@agent Multiply 19 by 21, then subtract 99 from the product.", says(300), "300"),
    Task("years-to-2100", "datetime>calculate",
         "@agent Which year is it now, and how many years remain until the year 2100?",
         says(lambda o: {2100 - y for y in this_year(o)}), "2100 - this year"),
    Task("refund-note", "documents>note",
         "@agent Find how many days Lanternfish gives for a refund and save that in a note.",
         note_says(30), "a note with 30"),
    Task("pages-x3-note", "documents>calculate>note",
         "@agent Look up how many status pages the Lanternfish Team plan includes, multiply that by 3, and "
         "save the result as a note.",
         note_says(15), "a note with 15 (3 x 5)"),
]  # fmt: skip
#: Written at the start of stop 28, before any change of that stop, once ``fresh`` had been run and its
#: failures read: the next untouched eight, run only at the end of a round of tuning. One per kind.
UNSEEN = [
    Task("checks-x4", "documents>calculate",
         "@agent How many checks do 4 installations of the Lanternfish Team plan include altogether?",
         says(1000), "1000 (4 x 250)"),
    Task("error-bytes", "documents>calculate",
         "@agent For a failed check, Lanternfish keeps the first part of the error. How many bytes is that?",
         says(lambda o: {2048.0, 2000.0}), "2048 (2 KB; 2000 accepted)"),
    Task("month-note", "datetime>note", "@agent Save a note with the name of the current month.",
         lambda o: any(d.strftime("%B").lower() in n.lower() for n in o.notes for d in (o.started, o.ended)),
         "a note naming this month"),
    Task("keep-note", "calculate>note", "@agent Find the value of 96 / 4 + 13 and keep it in a note.",
         note_says(37), "a note with 37"),
    Task("square-minus", "calculate>calculate", "@agent Square 27, then take 29 away from that.",
         says(700), "700"),
    Task("day-x3", "datetime>calculate",
         "@agent What day of the month is it today, and what is that number times 3?",
         says(lambda o: {3.0 * d.day for d in (o.started, o.ended)}), "3 x the day of the month"),
    Task("docker-note", "documents>note",
         "@agent Find which Docker version Lanternfish needs at least and write it down in a note.",
         note_says(24), "a note with 24"),
    Task("hobby-x7-note", "documents>calculate>note",
         "@agent Find how many checks the Lanternfish Hobby plan allows, multiply that by 7, and store the "
         "result in a note.",
         note_says(140), "a note with 140 (7 x 20)"),
]  # fmt: skip
#: Written at the start of stop 29, before any change of that stop, once ``unseen``'s failures were known:
#: the next untouched eight, run only once that stop's tuning was done. One per kind.
BLIND = [
    Task("interval-hour", "documents>calculate",
         "@agent How many times an hour does a Lanternfish check run at its shortest interval?",
         says(120), "120 (every 30 seconds)"),
    Task("memory-kb", "documents>calculate",
         "@agent How much memory does Lanternfish need for up to 200 checks, in kilobytes?",
         says(lambda o: {524288.0, 512000.0}), "524288 (512 MB; 512000 accepted)"),
    Task("date-title-note", "datetime>note", "@agent Put today's date in a note.",
         note_with_date, "a note with today's date"),
    Task("write-note", "calculate>note", "@agent Calculate 64 * 15 and write the result into a note.",
         note_says(960), "a note with 960"),
    Task("sum-double", "calculate>calculate", "@agent Add 345 and 678, then multiply the sum by 2.",
         says(2046), "2046"),
    Task("since-2000", "datetime>calculate",
         "@agent What year is it, and how many years have passed since 2000?",
         says(lambda o: {y - 2000 for y in this_year(o)}), "this year - 2000"),
    Task("team-size-note", "documents>note",
         "@agent Find out how many people make Lanternfish and note that number down.",
         note_says(4), "a note with 4"),
    Task("team-3y-note", "documents>calculate>note",
         "@agent Find the yearly price of the Lanternfish Team plan, multiply it by 3, and save the result "
         "in a note.",
         note_says(360), "a note with 360 (3 x 120)"),
]  # fmt: skip
#: Written at the start of stop 30, before any change of that stop, once ``blind``'s failures were known: the
#: next untouched eight, run only once that stop's tuning was done. One per kind, checks as before.
SEALED = [
    Task("down-x20", "documents>calculate",
         "@agent After how many failed attempts in a row is a Lanternfish check marked down? Multiply that "
         "number by 20.",
         says(60), "60 (3 x 20)"),
    Task("support-minutes", "documents>calculate",
         "@agent Support on the Lanternfish Business plan answers within some hours. How many minutes is "
         "that?",
         says(240), "240 (4 hours)"),
    Task("weekday-title-note", "datetime>note", "@agent Make a note of today's weekday.",
         note_with_weekday, "a note naming today's weekday"),
    Task("save-product", "calculate>note", "@agent Work out 73 * 29 and save it as a note.",
         note_says(2117), "a note with 2117"),
    Task("divide-add", "calculate>calculate", "@agent Divide 1500 by 12, then add 75 to the result.",
         says(200), "200"),
    Task("year-plus-25", "datetime>calculate",
         "@agent What year is it now, and which year will it be 25 years from now?",
         says(lambda o: {y + 25 for y in this_year(o)}), "this year + 25"),
    Task("pause-percent-note", "documents>note",
         "@agent Look up what percentage of checks must fail together before Lanternfish pauses alerts, "
         "and save that number in a note.",
         note_says(80), "a note with 80"),
    Task("team-year-note", "documents>calculate>note",
         "@agent Find the monthly price of the Lanternfish Team plan, multiply it by 12, and save the "
         "result in a note.",
         note_says(144), "a note with 144 (12 x 12)"),
]  # fmt: skip
#: Written in stop 30 once ``sealed`` had been run on that stop's starting code and read (all four of its
#: document tasks failed, all four others passed), before any change of that stop: the next untouched eight.
FINAL = [
    Task("pages-x6", "documents>calculate",
         "@agent How many status pages do 6 installations of the Lanternfish Team plan include in total?",
         says(30), "30 (6 x 5)"),
    Task("empty-wait-seconds", "documents>calculate",
         "@agent If a Lanternfish status page stays empty, how long should you wait before looking at the "
         "container log? Give it in seconds.",
         says(300), "300 (five minutes)"),
    Task("date-down-note", "datetime>note", "@agent Write down today's date in a note.",
         note_with_date, "a note with today's date"),
    Task("keep-product", "calculate>note", "@agent Compute 88 * 12 and keep the result as a note.",
         note_says(1056), "a note with 1056"),
    Task("minus-divide", "calculate>calculate",
         "@agent Subtract 250 from 1000, then divide what is left by 5.",
         says(150), "150"),
    Task("since-1969", "datetime>calculate",
         "@agent What is the current year, and how many years is it since 1969?",
         says(lambda o: {y - 1969 for y in this_year(o)}), "this year - 1969"),
    Task("python-note", "documents>note",
         "@agent Find the Python version Lanternfish's plain install needs and save it in a note.",
         note_says(3.11), "a note with 3.11"),
    Task("business-tenth-note", "documents>calculate>note",
         "@agent Find the yearly price of the Lanternfish Business plan, divide it by 10, and save the "
         "result in a note.",
         note_says(49), "a note with 49 (490 / 10)"),
]  # fmt: skip
#: Written in stop 30 once ``final`` had been run before and after that stop's first change and read, before
#: any further change: the next untouched eight, one per kind.
LAST = [
    Task("log-lines-x4", "documents>calculate",
         "@agent The troubleshooting notes look at the last lines of the container log. How many lines is "
         "that, times 4?",
         says(200), "200 (4 x 50)"),
    Task("free-months-days", "documents>calculate",
         "@agent How many months free does paying yearly for Lanternfish give? How many days is that, at 30 "
         "days a month?",
         says(60), "60 (2 x 30)"),
    Task("weekday-store-note", "datetime>note", "@agent Store a note that names today's weekday.",
         note_with_weekday, "a note naming today's weekday"),
    Task("sum-save", "calculate>note", "@agent Work out 456 + 789 and save the sum in a note.",
         note_says(1245), "a note with 1245"),
    Task("times-minus", "calculate>calculate",
         "@agent Multiply 14 by 15, then subtract 10 from the result.", says(200), "200"),
    Task("until-2050", "datetime>calculate",
         "@agent What year is it, and how many years are left until 2050?",
         says(lambda o: {2050 - y for y in this_year(o)}), "2050 - this year"),
    Task("cores-note", "documents>note",
         "@agent Find how many CPU cores Lanternfish needs for up to 200 checks and save that in a note.",
         note_says(1), "a note with 1"),
    Task("hobby-pages-note", "documents>calculate>note",
         "@agent Find how many status pages the Lanternfish Hobby plan includes, add 9 to it, and save the "
         "result in a note.",
         note_says(10), "a note with 10 (1 + 9)"),
]  # fmt: skip
#: Written at the start of stop 31, before any change of that stop, once ``last`` had been read: the next
#: untouched eight, one per kind. Two of its document tasks read the pricing table, two read prose.
CODA = [
    Task("checks-per-page", "documents>calculate",
         "@agent How many checks per status page does the Lanternfish Team plan give? Divide its checks by "
         "its status pages.",
         says(50), "50 (250 / 5)"),
    Task("slow-runs-day", "documents>calculate",
         "@agent How many times a day does a Lanternfish check run at its longest interval?",
         says(288), "288 (every 5 minutes)"),
    Task("date-jot-note", "datetime>note", "@agent Jot down today's date in a note.",
         note_with_date, "a note with today's date"),
    Task("put-product", "calculate>note", "@agent Calculate 123 * 9 and put the result in a note.",
         note_says(1107), "a note with 1107"),
    Task("add-divide", "calculate>calculate", "@agent Add 250 and 150, then divide the sum by 8.",
         says(50), "50"),
    Task("since-1950", "datetime>calculate",
         "@agent Which year is it, and how many years have gone by since 1950?",
         says(lambda o: {y - 1950 for y in this_year(o)}), "this year - 1950"),
    Task("business-price-note", "documents>note",
         "@agent Find the monthly price of the Lanternfish Business plan and save it in a note.",
         note_says(49), "a note with 49"),
    Task("retention-months-note", "documents>calculate>note",
         "@agent Find how many days Lanternfish keeps check results, divide that by 30, and save the result "
         "in a note.",
         note_says(3), "a note with 3 (90 / 30)"),
]  # fmt: skip
#: Written in stop 31 once ``coda`` had been run before and after that stop's first change (tables as named
#: rows) and read, before any further change: the next untouched eight, one per kind.
ENCORE = [
    Task("reset-minutes-x4", "documents>calculate",
         "@agent For how many minutes is Lanternfish's password reset link valid? Multiply that by 4.",
         says(60), "60 (4 x 15)"),
    Task("hobby-team-checks", "documents>calculate",
         "@agent How many checks do the Lanternfish Hobby and Team plans include together?",
         says(270), "270 (20 + 250)"),
    Task("date-record-note", "datetime>note", "@agent Record today's date in a note.",
         note_with_date, "a note with today's date"),
    Task("product-save", "calculate>note", "@agent Multiply 47 by 21 and save the product in a note.",
         note_says(987), "a note with 987"),
    Task("minus-halve", "calculate>calculate", "@agent Take 125 away from 2025, then halve the result.",
         says(950), "950"),
    Task("age-1985", "datetime>calculate",
         "@agent What year is it now, and how old does someone born in 1985 turn this year?",
         says(lambda o: {y - 1985 for y in this_year(o)}), "this year - 1985"),
    Task("pause-minutes-note", "documents>note",
         "@agent Find for how many minutes Lanternfish pauses alerts when most checks fail together, and "
         "note that number.",
         note_says(10), "a note with 10"),
    Task("business-x2-note", "documents>calculate>note",
         "@agent Find the monthly price of the Lanternfish Business plan, multiply it by 2, and save the "
         "result in a note.",
         note_says(98), "a note with 98 (2 x 49)"),
]  # fmt: skip
#: Written in stop 32 for the strict reading, before any change of that stop, and run untouched first: one
#: per kind of two-step task, each with the figures a person may read in its answer.
PERSON = [
    Task("team-x5-year", "documents>calculate",
         "@agent What would 5 installations of the Lanternfish Team plan cost per year, paid monthly?",
         says(720), "720 (5 x 12 x 12 EUR)", {5, 12, 720, 60}),
    Task("hobby-pages-x6", "documents>calculate",
         "@agent How many status pages do 6 Lanternfish Hobby installations give in total?",
         says(6), "6 (6 x 1)", {6, 1}),
    Task("date-keep-note", "datetime>note", "@agent Keep today's date in a note for me.",
         note_with_date, "a note with today's date", clock_figures),
    Task("product-keep", "calculate>note", "@agent Work out 64 * 15 and keep the result in a note.",
         note_says(960), "a note with 960", {960}),
    Task("times-then-plus", "calculate>calculate", "@agent Multiply 36 by 25, then add 75 to the product.",
         says(975), "975", {900, 975}),
    Task("years-to-2050", "datetime>calculate",
         "@agent What year is it, and how many years are left until 2050?",
         says(lambda o: {2050 - y for y in this_year(o)}), "2050 - this year",
         lambda o: clock_figures(o) | {2050 - y for y in this_year(o)}),
    Task("refund-days-note", "documents>note",
         "@agent Look up within how many days a Lanternfish refund can be asked for and save it in a note.",
         note_says(30), "a note with 30", {30}),
    Task("checks-x3-note", "documents>calculate>note",
         "@agent Find how many checks the Lanternfish Hobby plan includes, multiply that by 3, and save the "
         "result in a note.",
         note_says(60), "a note with 60 (3 x 20)", {20, 60}),
]  # fmt: skip
#: One step or none, written with ``person`` and run untouched first: a sum, the weekday and the date, facts
#: from the documents, and general knowledge that needs no tool. None asks for a write.
SINGLE = [
    Task("sum-only", "calculate", "@agent What is 348 + 579?", says(927), "927", {927}),
    Task("share-only", "calculate", "@agent How much is 15% of 240?", says(36), "36", {36}),
    Task("weekday-only", "datetime", "@agent What day of the week is it today?",
         weekday_named, "today's weekday", clock_figures),
    Task("date-only", "datetime", "@agent What is today's date?", date_said, "today's date", clock_figures),
    Task("port-only", "documents", "@agent Which port does the Lanternfish web interface listen on?",
         says(8640), "8640", {8640}),
    Task("team-price-only", "documents", "@agent How much does the Lanternfish Team plan cost per month?",
         says(12), "12 EUR", {12}),
    Task("capital-only", "none", "@agent What is the capital of France?", mentions("Paris"), "Paris", set()),
    Task("author-only", "none", "@agent Who wrote the play Romeo and Juliet?", mentions("Shakespeare"),
         "Shakespeare", set()),
]  # fmt: skip
#: Written in stop 44 before the turn's tools were chosen by relevance (issue 33, item 2), and run untouched
#: first: one per kind of two-step task, each with the figures a person may read in its answer.
PLAIN = [
    Task("business-year-x2", "documents>calculate",
         "@agent How much do 2 Lanternfish Business installations cost per year when paid yearly?",
         says(980), "980 (2 x 490 EUR)", {2, 490, 980}),
    Task("team-checks-x4", "documents>calculate",
         "@agent How many checks do 4 Lanternfish Team installations allow altogether?",
         says(1000), "1000 (4 x 250)", {4, 250, 1000}),
    Task("weekday-note", "datetime>note", "@agent Save a note saying which day of the week it is today.",
         note_with_weekday, "a note with today's weekday", clock_figures),
    Task("product-note", "calculate>note", "@agent Compute 125 times 8 and put the answer in a note.",
         note_says(1000), "a note with 1000", {125, 8, 1000}),
    Task("divide-then-minus", "calculate>calculate", "@agent Divide 1440 by 12, then subtract 30 from that.",
         says(90), "90", {1440, 12, 120, 30, 90}),
    Task("age-born-1990", "datetime>calculate",
         "@agent How old does someone born in 1990 turn this year?",
         says(years_since_1990), "this year - 1990", lambda o: clock_figures(o) | years_since_1990(o)),
    Task("reset-link-note", "documents>note",
         "@agent Look up how many minutes a Lanternfish password reset link stays valid and save that in a "
         "note.", note_says(15), "a note with 15", {15}),
    Task("team-year-x3-note", "documents>calculate>note",
         "@agent Take the yearly price of the Lanternfish Team plan, multiply it by 3, and save the result "
         "in a note.", note_says(360), "a note with 360 (3 x 120)", {120, 3, 360}),
]  # fmt: skip
#: One step or none, written with ``plain`` and run untouched first. None asks for a write.
BRIEF = [
    Task("minus-only", "calculate", "@agent What is 1234 minus 567?", says(667), "667", {1234, 567, 667}),
    Task("square-only", "calculate", "@agent What is 23 squared?", says(529), "529", {23, 2, 529}),
    Task("month-only", "datetime", "@agent Which month is it right now?", month_named, "this month",
         clock_figures),
    Task("year-only", "datetime", "@agent What year is it?", says(this_year), "this year", clock_figures),
    Task("down-after", "documents",
         "@agent After how many failed attempts in a row is a Lanternfish check marked down?",
         says(3), "3", {3}),
    Task("retention-days", "documents", "@agent How long does Lanternfish keep check results?",
         says(90), "90 days", {90}),
    Task("gold-symbol", "none", "@agent What is the chemical symbol for gold?", mentions("Au"), "Au", set()),
    Task("thanks-french", "none", "@agent How do you say 'thank you' in French?", mentions("merci"),
         "merci", set()),
]  # fmt: skip
#: Written in stop 48 before any change of that stop, and run untouched first: one per kind of two-step task.
MORROW = [
    Task("business-month-x3", "documents>calculate",
         "@agent What do 3 Lanternfish Business installations cost per month in total?",
         says(147), "147 (3 x 49 EUR)", {3, 49, 147}),
    Task("team-pages-x7", "documents>calculate",
         "@agent How many status pages do 7 Lanternfish Team installations give altogether?",
         says(35), "35 (7 x 5)", {7, 5, 35}),
    Task("date-note-down", "datetime>note", "@agent Note down today's date for me.",
         note_with_date, "a note with today's date", clock_figures),
    Task("times-note", "calculate>note", "@agent Work out 48 times 25 and save the answer as a note.",
         note_says(1200), "a note with 1200", {48, 25, 1200}),
    Task("sum-then-times", "calculate>calculate", "@agent Add 250 and 175, then multiply the sum by 4.",
         says(1700), "1700", {250, 175, 425, 4, 1700}),
    Task("years-since-1969", "datetime>calculate", "@agent How many years ago was 1969?",
         says(lambda o: {y - 1969 for y in this_year(o)}), "this year - 1969",
         lambda o: clock_figures(o) | {1969.0} | {y - 1969 for y in this_year(o)}),
    Task("pause-minutes-note", "documents>note",
         "@agent Find out for how many minutes Lanternfish pauses alerts when most checks fail together, "
         "and save that in a note.", note_says(10), "a note with 10", {10, 80}),
    Task("business-x12-note", "documents>calculate>note",
         "@agent Take the monthly price of the Lanternfish Business plan, multiply it by 12, and save the "
         "result in a note.", note_says(588), "a note with 588 (12 x 49)", {49, 12, 588}),
]  # fmt: skip
#: One step or none, written with ``morrow`` and run untouched first. None asks for a write.
NUDGE = [
    Task("divide-only", "calculate", "@agent What is 906 divided by 3?", says(302), "302", {906, 3, 302}),
    Task("times-only", "calculate", "@agent What is 17 times 19?", says(323), "323", {17, 19, 323}),
    Task("weekday-now", "datetime", "@agent Which day of the week is it?", weekday_named, "today's weekday",
         clock_figures),
    Task("month-now", "datetime", "@agent What month are we in?", month_named, "this month", clock_figures),
    Task("memory-needed", "documents",
         "@agent How much memory does a Lanternfish server need for up to 200 checks?",
         says(512), "512 MB", {512, 200, 1}),
    Task("refund-window", "documents", "@agent Within how many days can I get a Lanternfish refund?",
         says(30), "30 days", {30}),
    Task("largest-planet", "none", "@agent What is the largest planet in our solar system?",
         mentions("Jupiter"), "Jupiter", set()),
    Task("mona-lisa", "none", "@agent Who painted the Mona Lisa?", mentions("Leonardo"), "Leonardo",
         set()),
]  # fmt: skip
#: Written in stop 49 before any change of that stop, and run untouched first: one per kind of two-step task.
LEDGER = [
    Task("team-month-x4", "documents>calculate",
         "@agent What would 4 Lanternfish Team installations cost per month in total?",
         says(48), "48 (4 x 12 EUR)", {4, 12, 48}),
    Task("team-yearly-x6", "documents>calculate",
         "@agent How much do 6 Lanternfish Team installations cost per year when paid yearly?",
         says(720), "720 (6 x 120 EUR)", {6, 120, 720}),
    Task("weekday-keep", "datetime>note", "@agent Make a note of today's weekday.",
         note_with_weekday, "a note with today's weekday", clock_figures),
    Task("times-store", "calculate>note", "@agent Calculate 36 times 14 and store the result in a note.",
         note_says(504), "a note with 504", {36, 14, 504}),
    Task("minus-then-divide", "calculate>calculate",
         "@agent Subtract 45 from 300, then divide the result by 5.", says(51), "51", {300, 45, 255, 5, 51}),
    Task("years-to-2100", "datetime>calculate", "@agent How many years are left until the year 2100?",
         says(lambda o: {2100 - y for y in this_year(o)}), "2100 - this year",
         lambda o: clock_figures(o) | {2100.0} | {2100 - y for y in this_year(o)}),
    Task("interval-note", "documents>note",
         "@agent Look up the shortest interval, in seconds, at which a Lanternfish check can run and save it "
         "in a note.", note_says(30), "a note with 30", {30}),
    Task("pages-x6-note", "documents>calculate>note",
         "@agent Take the number of status pages of the Lanternfish Team plan, multiply it by 6, and save "
         "the result in a note.", note_says(30), "a note with 30 (6 x 5)", {5, 6, 30}),
]  # fmt: skip
#: One step or none, written with ``ledger`` and run untouched first. None asks for a write.
PLUMB = [
    Task("divide-2048", "calculate", "@agent What is 2048 divided by 16?", says(128), "128", {2048, 16, 128}),
    Task("plus-389", "calculate", "@agent What is 125 plus 389?", says(514), "514", {125, 389, 514}),
    Task("date-tell", "datetime", "@agent Tell me today's date.", date_said, "today's date", clock_figures),
    Task("year-now", "datetime", "@agent Which year are we in?", says(this_year), "this year", clock_figures),
    Task("team-pages", "documents", "@agent How many status pages does the Lanternfish Team plan include?",
         says(5), "5", {5}),
    Task("hobby-checks", "documents", "@agent How many checks does the free Lanternfish Hobby plan include?",
         says(20), "20", {20}),
    Task("water-boils", "none", "@agent At what temperature in Celsius does water boil at sea level?",
         says(100), "100", {100}),
    Task("largest-ocean", "none", "@agent Which ocean is the largest on Earth?", mentions("Pacific"),
         "Pacific", set()),
]  # fmt: skip
#: Written in stop 49 before any change of that stop, and run untouched first: one per kind of two-step task.
QUARRY = [
    Task("business-yearly-x3", "documents>calculate",
         "@agent What would 3 Lanternfish Business installations cost per year when paid yearly?",
         says(1470), "1470 (3 x 490 EUR)", {3, 490, 1470}),
    Task("alert-pause-secs", "documents>calculate",
         "@agent For how many seconds does Lanternfish pause alerts when most checks fail together?",
         says(600), "600 (10 minutes)", {10, 600}),
    Task("date-put", "datetime>note", "@agent Put today's date in a note.", note_with_date,
         "a note with today's date", clock_figures),
    Task("times-keep", "calculate>note", "@agent Work out 58 times 7 and keep the answer in a note.",
         note_says(406), "a note with 406", {58, 7, 406}),
    Task("times-then-minus", "calculate>calculate", "@agent Multiply 12 by 15, then subtract 30 from that.",
         says(150), "150", {12, 15, 180, 30, 150}),
    Task("years-since-1969", "datetime>calculate", "@agent How many years ago was the year 1969?",
         says(lambda o: {y - 1969 for y in this_year(o)}), "this year - 1969",
         lambda o: clock_figures(o) | {1969.0} | {y - 1969 for y in this_year(o)}),
    Task("reset-note", "documents>note",
         "@agent Find out how long Lanternfish's password reset link stays valid and note it down.",
         note_says(15), "a note with 15", {15}),
    Task("business-yearly-x2-note", "documents>calculate>note",
         "@agent Look up the yearly price of the Lanternfish Business plan, multiply it by 2, and save the "
         "result in a note.", note_says(980), "a note with 980 (2 x 490)", {490, 2, 980}),
]  # fmt: skip
#: One step or none, written with ``quarry`` and run untouched first. None asks for a write.
SPRIG = [
    Task("times-19-21", "calculate", "@agent What is 19 times 21?", says(399), "399", {19, 21, 399}),
    Task("minus-357", "calculate", "@agent What is 1000 minus 357?", says(643), "643", {1000, 357, 643}),
    Task("month-now", "datetime", "@agent What month is it right now?", month_named, "this month",
         clock_figures),
    Task("weekday-now", "datetime", "@agent What day of the week is it today?", weekday_named,
         "today's weekday", clock_figures),
    Task("retention-kept", "documents", "@agent How many days does Lanternfish keep check results?",
         says(90), "90", {90}),
    Task("refund-window", "documents", "@agent Within how many days can I ask for a Lanternfish refund?",
         says(30), "30", {30}),
    Task("capital-japan", "none", "@agent What is the capital of Japan?", mentions("Tokyo"), "Tokyo",
         set()),
    Task("spider-legs", "none", "@agent How many legs does a spider have?", says(8), "8", {8}),
]  # fmt: skip
#: Written in stop 49 after ``quarry`` and ``sprig`` were run, before the change it measures (``unit_given``):
#: a figure asked for in a unit, which the documents give in that unit (a lookup) or in another (a
#: conversion, for ``calculate``).
THICKET = [
    Task("reset-minutes", "documents",
         "@agent For how many minutes is the Lanternfish password reset link valid?", says(15), "15", {15}),
    Task("reset-seconds", "documents>calculate",
         "@agent How many seconds is the Lanternfish password reset link valid for?", says(900),
         "900 (15 minutes)", {15, 60, 900}),
    Task("support-hours", "documents",
         "@agent Within how many hours does Lanternfish support answer Business customers?", says(4),
         "4", {4}),
    Task("pause-minutes", "documents",
         "@agent How many minutes does Lanternfish pause alerts when most checks fail at once?", says(10),
         "10", {10, 80}),
    Task("money-back-days", "documents",
         "@agent How many days after buying can I still get my money back for Lanternfish?", says(30), "30",
         {30}),
    Task("refund-hours", "documents>calculate",
         "@agent How many hours long is the Lanternfish refund window?",
         says(720), "720 (30 days)", {30, 24, 720}),
    Task("shortest-interval", "documents",
         "@agent What is the shortest interval a Lanternfish check can run at, in seconds?", says(30), "30",
         {30}),
    Task("support-minutes", "documents>calculate",
         "@agent In minutes, how fast does Lanternfish support answer Business customers?", says(240),
         "240 (4 hours)", {4, 60, 240}),
]  # fmt: skip
#: Written in stop 50 before any change of that stop, and run untouched first: one per kind of two-step task,
#: on facts of the sample documents no earlier set asked for where there was one.
BRAMBLE = [
    Task("team-checks-x3", "documents>calculate",
         "@agent How many checks do 3 Lanternfish Team installations give in total?", says(750),
         "750 (3 x 250)", {3, 250, 750}),
    Task("team-9-months", "documents>calculate",
         "@agent What does one Lanternfish Team installation cost for 9 months?", says(108),
         "108 (9 x 12 EUR)", {9, 12, 108}),
    Task("weekday-save", "datetime>note", "@agent Save a note saying what day of the week it is today.",
         note_with_weekday, "a note with today's weekday", clock_figures),
    Task("times-write", "calculate>note", "@agent Compute 64 times 15 and write the result down in a note.",
         note_says(960), "a note with 960", {64, 15, 960}),
    Task("divide-then-plus", "calculate>calculate", "@agent Divide 840 by 7, then add 65 to the result.",
         says(185), "185", {840, 7, 120, 65, 185}),
    Task("years-since-2001", "datetime>calculate", "@agent How many years have passed since 2001?",
         says(lambda o: {y - 2001 for y in this_year(o)}), "this year - 2001",
         lambda o: clock_figures(o) | {2001.0} | {y - 2001 for y in this_year(o)}),
    Task("error-kb-note", "documents>note",
         "@agent Look up how much of a failed check's error Lanternfish keeps and save that in a note.",
         note_says(2), "a note with 2 (KB)", {2}),
    Task("hobby-x4-note", "documents>calculate>note",
         "@agent Take the number of checks in the Lanternfish Hobby plan, multiply it by 4, and save the "
         "result in a note.", note_says(80), "a note with 80 (4 x 20)", {20, 4, 80}),
]  # fmt: skip
#: One step or none, written with ``bramble`` and run untouched first. None asks for a write.
MOSS = [
    Task("plus-469", "calculate", "@agent What is 72 plus 469?", says(541), "541", {72, 469, 541}),
    Task("percent-640", "calculate", "@agent What is 15 percent of 640?", says(96), "96", {15, 640, 96}),
    Task("date-today", "datetime", "@agent What's the date today?", date_said, "today's date", clock_figures),
    Task("year-is", "datetime", "@agent What year is it?", says(this_year), "this year", clock_figures),
    Task("team-yearly", "documents", "@agent What does the Lanternfish Team plan cost a year if paid yearly?",
         says(120), "120 EUR", {120}),
    Task("empty-minutes", "documents",
         "@agent After how many minutes of \"No data yet\" on the Lanternfish status page should I read the "
         "container log?", says(5), "5", {5, 50}),
    Task("romeo-author", "none", "@agent Who wrote Romeo and Juliet?", mentions("Shakespeare"),
         "Shakespeare", set()),
    Task("continents", "none", "@agent How many continents are there on Earth?", says(7), "7", {7}),
]  # fmt: skip
#: Written in stop 50 before the change it measures (units in ``calculate``), and run untouched first: a
#: figure to convert from one unit of time to another, given in the question or read from the documents.
FEN = [
    Task("hours-in-weeks", "calculate", "@agent How many hours are there in 3 weeks?", says(504), "504",
         {3, 7, 24, 21, 168, 504}),
    Task("minutes-in-hours", "calculate", "@agent How many minutes are in 2.5 hours?", says(150), "150",
         {2.5, 60, 150}),
    Task("seconds-in-day", "calculate", "@agent How many seconds does a day have?", says(86400), "86400",
         {1, 24, 60, 3600, 1440, 86400}),
    Task("longest-interval-secs", "documents>calculate",
         "@agent What is the longest interval a Lanternfish check can run at, in seconds?", says(300),
         "300 (5 minutes)", {5, 60, 300}),
    Task("retention-hours", "documents>calculate",
         "@agent For how many hours does Lanternfish keep check results?", says(2160), "2160 (90 days)",
         {90, 24, 2160}),
    Task("support-seconds", "documents>calculate",
         "@agent Within how many seconds does Lanternfish support answer Business customers?", says(14400),
         "14400 (4 hours)", {4, 60, 3600, 14400}),
    Task("refund-minutes", "documents>calculate",
         "@agent How many minutes long is the Lanternfish refund window?", says(43200), "43200 (30 days)",
         {30, 24, 60, 720, 1440, 43200}),
    Task("no-data-seconds", "documents>calculate",
         "@agent After how many seconds of \"No data yet\" should I read the Lanternfish container log?",
         says(300), "300 (five minutes)", {5, 60, 300, 50}),
]  # fmt: skip
#: Written in stop 50 before the change it measures (``calculate`` offered by its words only), and run
#: untouched first: questions with no figure to compute with, some needing arithmetic all the same.
HEATH = [
    Task("business-yearly-price", "documents",
         "@agent What does the Lanternfish Business plan cost a year if paid yearly?", says(490), "490 EUR",
         {490}),
    Task("business-monthly-year", "documents>calculate",
         "@agent What does the Lanternfish Business plan cost over a year if I pay every month?", says(588),
         "588 (12 x 49 EUR)", {49, 12, 588}),
    Task("team-monthly-price", "documents", "@agent What does a Lanternfish Team installation cost a month?",
         says(12), "12 EUR", {12}),
    Task("hobby-price", "documents", "@agent What does the Lanternfish Hobby plan cost?", mentions("free"),
         "free", {0}),
    Task("half-hundred", "calculate", "@agent How much is half of a hundred?", says(50), "50", {50, 100}),
    Task("leap-year-days", "none", "@agent How many days does a leap year have?", says(366), "366", {366}),
    Task("fahrenheit-boil", "none", "@agent At how many degrees Fahrenheit does water boil?", says(212),
         "212", {212}),
    Task("friday-note", "note", "@agent Save a note that the team meeting is on Friday.",
         lambda o: any("friday" in n.lower() for n in o.notes), "a note naming Friday", set()),
]  # fmt: skip
#: Written in stop 51 before any change it measures, and run untouched first, with and without
#: ``--history``: six two-step tasks (one per kind where the documents allow) and six of one step or none, on
#: facts of the sample documents no earlier set asked for.
REED = [
    Task("memory-x3", "documents>calculate",
         "@agent How much memory do 3 Lanternfish servers need together at the stated minimum, in MB?",
         says(1536), "1536 (3 x 512 MB)", {3, 512, 1536, 1, 200}),
    Task("team-2-years", "documents>calculate",
         "@agent What does the Lanternfish Team plan cost for 2 years if paid yearly?", says(240),
         "240 (2 x 120 EUR)", {2, 120, 240}),
    Task("team-minus-hobby", "documents>calculate",
         "@agent How many more checks does the Lanternfish Team plan give than the Hobby plan?", says(230),
         "230 (250 - 20)", {250, 20, 230}),
    Task("reset-twice", "documents>calculate",
         "@agent For how many minutes is the Lanternfish reset link valid, and what is twice that?", says(30),
         "30 (2 x 15)", {15, 2, 30}),
    Task("sum-note", "calculate>note", "@agent Add 238 and 517 and save the sum in a note.", note_says(755),
         "a note with 755", {238, 517, 755}),
    Task("date-into-note", "datetime>note", "@agent Write today's date into a note.", note_with_date,
         "a note with today's date", clock_figures),
    Task("times-7-5", "calculate", "@agent What is 7.5 multiplied by 8?", says(60), "60", {7.5, 8, 60}),
    Task("weekday-tell", "datetime", "@agent Tell me today's weekday.", weekday_named, "today's weekday",
         clock_figures),
    Task("cpu-cores", "documents", "@agent How many CPU cores does a Lanternfish server need?", says(1), "1",
         {1, 200, 512}),
    Task("business-pages", "documents",
         "@agent How many status pages does the Lanternfish Business plan include?", mentions("unlimited"),
         "unlimited", set()),
    Task("hexagon-sides", "none", "@agent How many sides does a hexagon have?", says(6), "6", {6}),
    Task("canada-capital", "none", "@agent What is the capital of Canada?", mentions("Ottawa"), "Ottawa",
         set()),
]  # fmt: skip
#: Written in stop 52 before any change it measures, and run untouched first, with and without
#: ``--history``: six two-step tasks (a difference, a saving, a product of a fact, a note of a computed
#: figure, a date's arithmetic, a note of a listed fact) and six of one step or none, in wordings no earlier
#: set used.
SEDGE = [
    Task("business-over-team", "documents>calculate",
         "@agent By how much is the Lanternfish Business plan's monthly price higher than the Team plan's?",
         says(37), "37 EUR (49 - 12)", {49, 12, 37}),
    Task("team-yearly-saving", "documents>calculate",
         "@agent How much do I save in a year on the Lanternfish Team plan by paying yearly instead of "
         "monthly?", says(24), "24 EUR (12 x 12 - 120)", {12, 144, 120, 24}),
    Task("error-kb-x5", "documents>calculate",
         "@agent How many KB of error text does Lanternfish keep for 5 failed checks?", says(10),
         "10 KB (5 x 2 KB)", {5, 2, 10}),
    Task("product-note", "calculate>note", "@agent Please work out 26 x 35 and record it as a note.",
         note_says(910), "a note with 910", {26, 35, 910}),
    Task("days-left-month", "datetime>calculate", "@agent How many days remain until the end of this month?",
         says(days_left_in_month), "the days left in this month", month_end_figures),
    Task("chat-tools-note", "documents>note",
         "@agent Look up which chat tools Lanternfish can send alerts to and keep them in a note.",
         lambda o: any("slack" in n.lower() and "matrix" in n.lower() for n in o.notes),
         "a note naming Slack and Matrix", set()),
    Task("divide-864", "calculate", "@agent What is 864 divided by 24?", says(36), "36", {864, 24, 36}),
    Task("day-of-month", "datetime", "@agent Which day of the month is it today?",
         says(lambda o: {float(o.started.day), float(o.ended.day)}), "today's day of the month",
         clock_figures),
    Task("team-city", "documents", "@agent In which city is the team that makes Lanternfish based?",
         mentions("Ghent"), "Ghent", {4}),
    Task("pause-percent", "documents",
         "@agent What share of all checks has to fail together before Lanternfish pauses its alerts?",
         says(80), "80 percent", {80, 10}),
    Task("planets", "none", "@agent How many planets are in our solar system?", says(8), "8", {8}),
    Task("novel-1984", "none", "@agent Who wrote the novel 1984?", mentions("Orwell"), "George Orwell",
         set()),
]  # fmt: skip
#: Written in stop 53 before any change it measures, and run untouched first, with and without
#: ``--history``: eight two-step tasks (one per kind, and a sum of two facts) and eight of one step or none,
#: in wordings no earlier set used.
FERN = [
    Task("servers-x4-checks", "documents>calculate",
         "@agent If I run Lanternfish on 4 servers of the stated minimum size, how many checks can they "
         "handle in all?", says(800), "800 (4 x 200)", {4, 200, 800, 1, 512}),
    Task("team-plus-business-yearly", "documents>calculate",
         "@agent What do the Lanternfish Team and Business plans cost together for one year, paid yearly?",
         says(610), "610 EUR (120 + 490)", {120, 490, 610, 1}),
    Task("reset-seconds", "documents>calculate",
         "@agent For how many seconds does the Lanternfish password reset link stay valid?", says(900),
         "900 (15 x 60)", {15, 60, 900}),
    Task("product-note-23", "calculate>note", "@agent Note down what 17 times 23 is.", note_says(391),
         "a note with 391", {17, 23, 391}),
    Task("year-40-ago", "datetime>calculate", "@agent Which year was it 40 years ago?",
         says(lambda o: {y - 40 for y in this_year(o)}), "this year - 40",
         lambda o: clock_figures(o) | {40.0} | {y - 40 for y in this_year(o)}),
    Task("weekday-in-note", "datetime>note", "@agent Put today's weekday in a note.", note_with_weekday,
         "a note with today's weekday", clock_figures),
    Task("retention-note", "documents>note",
         "@agent Find out how long Lanternfish keeps check results and note it down.", note_says(90),
         "a note with 90 days", {90}),
    Task("minus-then-halve", "calculate>calculate",
         "@agent Take 1000, subtract 280, then halve what is left.", says(360), "360",
         {1000, 280, 720, 360, 2}),
]  # fmt: skip
#: One step or none, written with ``fern`` and run untouched first.
FROND = [
    Task("power-of-two", "calculate", "@agent What is 2 to the power of 10?", says(1024), "1024",
         {2, 10, 1024}),
    Task("minus-1875", "calculate", "@agent What's 4500 minus 1875?", says(2625), "2625", {4500, 1875, 2625}),
    Task("which-month", "datetime", "@agent Tell me which month we are in.", month_named, "this month",
         clock_figures),
    Task("which-year", "datetime", "@agent What year is it?", says(this_year), "this year", clock_figures),
    Task("check-interval", "documents", "@agent How often can a Lanternfish check run at the most?", says(30),
         "every 30 seconds", {30, 1, 5}),
    Task("docker-version", "documents", "@agent What Docker version does Lanternfish need?", says(24),
         "Docker 24 or newer", {24, 3.11, 3}),
    Task("water-boils-celsius", "none", "@agent At what temperature in Celsius does water boil?", says(100),
         "100", {100}),
    Task("four-seasons", "none", "@agent Who composed The Four Seasons?", mentions("Vivaldi"),
         "Antonio Vivaldi", set()),
]  # fmt: skip
#: Written at the start of stop 56 (issue 33), before anything of that stop changed, and run untouched first:
#: one per kind of two-step task and a difference of two facts, in wordings no earlier set used.
GROVE = [
    Task("business-bill-x3", "documents>calculate",
         "@agent I run 3 Lanternfish installations on the Business plan and pay monthly. What is my monthly "
         "bill?", says(147), "147 EUR (3 x 49)", {3, 49, 147}),
    Task("team-yearly-x4", "documents>calculate",
         "@agent Paying yearly, what do 4 Lanternfish Team installations cost in a year?", says(480),
         "480 EUR (4 x 120)", {4, 120, 480, 2}),
    Task("business-minus-team", "documents>calculate",
         "@agent How much more does the Lanternfish Business plan cost per month than the Team plan?",
         says(37), "37 EUR (49 - 12)", {49, 12, 37}),
    Task("date-memo", "datetime>note", "@agent Make a memo of today's date in my notes.", note_with_date,
         "a note with today's date", clock_figures),
    Task("quotient-note", "calculate>note", "@agent Store the result of 1250 divided by 5 in a note.",
         note_says(250), "a note with 250", {1250, 5, 250}),
    Task("sum-then-triple", "calculate>calculate", "@agent Add 145 and 255, then multiply the total by 3.",
         says(1200), "1200", {145, 255, 400, 3, 1200}),
    Task("years-since-1999", "datetime>calculate", "@agent How many years have passed since 1999?",
         says(lambda o: {y - 1999 for y in this_year(o)}), "this year - 1999",
         lambda o: clock_figures(o) | {1999.0} | {y - 1999 for y in this_year(o)}),
    Task("alert-pause-note", "documents>note",
         "@agent Find out for how many minutes alerts are paused when most checks fail, and write that into "
         "a note.", note_says(10), "a note with 10 minutes", {10, 80}),
]  # fmt: skip
#: One step or none, written with ``grove`` and run untouched first. None asks for a write.
SPORE = [
    Task("seven-cubed", "calculate", "@agent What is 7 cubed?", says(343), "343", {7, 3, 343}),
    Task("divide-3600", "calculate", "@agent How much is 3600 divided by 48?", says(75), "75",
         {3600, 48, 75}),
    Task("weekday-which", "datetime", "@agent Which weekday is it?", weekday_named, "today's weekday",
         clock_figures),
    Task("year-current", "datetime", "@agent What's the current year?", says(this_year), "this year",
         clock_figures),
    Task("team-status-pages", "documents", "@agent How many status pages does the Lanternfish Team plan come "
         "with?", says(5), "5", {5}),
    Task("alert-pause-minutes", "documents",
         "@agent How long do Lanternfish alerts pause when most checks fail at once?", says(10), "10 minutes",
         {10, 80}),
    Task("tallest-mountain", "none", "@agent What is the tallest mountain in the world?", mentions("Everest"),
         "Mount Everest", {8848, 8848.86, 8849, 29029, 29032, 29031.7}),
    Task("red-planet", "none", "@agent Which planet is known as the Red Planet?", mentions("Mars"), "Mars",
         set()),
]  # fmt: skip
#: Written at the start of stop 57 (issue 33), before anything of that stop changed, and run untouched first:
#: one two-step task per kind (three read a figure from the documents), in wordings no earlier set used.
THORN = [
    Task("down-after-5min", "documents>calculate",
         "@agent My Lanternfish checks run every 5 minutes. How many minutes of failing does it take before "
         "a check is marked down?", says(15), "15 minutes (3 x 5)", {5, 3, 15}),
    Task("business-two-yearly", "documents>calculate",
         "@agent On yearly billing, what do two Lanternfish Business installations cost per year?", says(980),
         "980 EUR (2 x 490)", {2, 490, 980}),
    Task("team-pages-x3", "documents>calculate",
         "@agent I have 3 Lanternfish Team installations. How many status pages do I get across all of them?",
         says(15), "15 (3 x 5)", {3, 5, 15}),
    Task("memory-jot", "documents>note",
         "@agent Look up how much memory a Lanternfish server needs at least and jot it down in a note.",
         note_says(512), "a note with 512 MB", {512, 1, 200}),
    Task("product-48-15-note", "calculate>note", "@agent Multiply 48 by 15 and keep the answer in my notes.",
         note_says(720), "a note with 720", {48, 15, 720}),
    Task("year-in-33", "datetime>calculate", "@agent In 33 years, which year will it be?",
         says(lambda o: {y + 33 for y in this_year(o)}), "this year + 33",
         lambda o: clock_figures(o) | {33.0} | {y + 33 for y in this_year(o)}),
    Task("month-saved", "datetime>note", "@agent Save a note saying which month it is.", note_with_month,
         "a note with this month", clock_figures),
    Task("times-take-off", "calculate>calculate", "@agent Multiply 36 by 25 and take 150 off the result.",
         says(750), "750", {36, 25, 900, 150, 750}),
]  # fmt: skip
#: One step or none, written with ``thorn`` and run untouched first. None asks for a write.
LICHEN = [
    Task("sqrt-1764", "calculate", "@agent What is the square root of 1764?", says(42), "42", {1764, 42, 2}),
    Task("times-125-16", "calculate", "@agent How much is 125 times 16?", says(2000), "2000",
         {125, 16, 2000}),
    Task("month-of-year", "datetime", "@agent Which month of the year are we in now?", month_named,
         "this month", clock_figures),
    Task("date-now", "datetime", "@agent Can you tell me today's full date?", date_said, "today's date",
         clock_figures),
    Task("team-checks", "documents", "@agent How many checks come with the Lanternfish Team plan?", says(250),
         "250", {250}),
    Task("private-network", "documents",
         "@agent What do I need to run to monitor services on a private network with Lanternfish?",
         mentions("probe"), "a Lanternfish probe", set()),
    Task("octopus-hearts", "none", "@agent How many hearts does an octopus have?", says(3), "3", {3}),
    Task("starry-night", "none", "@agent Who painted The Starry Night?", mentions("Gogh"), "Vincent van Gogh",
         set()),
]  # fmt: skip
#: Written in stop 58, before G3's check of ``calculate``'s operands was measured: each asked in a workspace
#: with no documents (the dev server's ``default``). The first five need a figure nobody gave; a person
#: expects to hear it is not known, not a made-up price and its product. The last three give every figure.
HUSK = [
    Task("team-x3-unpriced", "documents>calculate",
         "@agent What do 3 Lanternfish Team installations cost per month?", no_guess(3), "not known", set(),
         bare=True),
    Task("pro-seats-yearly", "documents>calculate", "@agent How much would 4 Pro seats cost us per year?",
         no_guess(4), "not known", set(), bare=True),
    Task("crates-weight", "documents>calculate",
         "@agent What do 6 of our standard shipping crates weigh in total?", no_guess(6), "not known", set(),
         bare=True),
    Task("migrate-servers-hours", "documents>calculate",
         "@agent How many hours will it take to migrate our 12 servers?", no_guess(12), "not known", set(),
         bare=True),
    Task("cloud-bill-15pct", "documents>calculate", "@agent What is 15 percent of our monthly cloud bill?",
         no_guess(15), "not known", set(), bare=True),
    Task("seat-given-yearly", "calculate",
         "@agent A Team seat costs 14 EUR a month. What do 3 seats cost per year?", says(504), "504",
         {14, 3, 12, 42, 168, 504}, bare=True),
    Task("percent-of-250", "calculate", "@agent What is 18 percent of 250?", says(45), "45", {18, 250, 45},
         bare=True),
    Task("hours-in-9-weeks", "calculate", "@agent How many hours are there in 9 weeks?", says(1512), "1512",
         {9, 7, 24, 63, 168, 1512}, bare=True),
]  # fmt: skip
#: Written in stop 58 after ``husk`` had been read and before ``reminder_alone`` was measured on it: word
#: problems, the clock and general knowledge in a workspace with no documents, none of them a lookup.
BURR = [
    Task("tickets-15", "calculate", "@agent A bus ticket costs 3.20 EUR. What do 15 tickets cost?", says(48),
         "48 EUR", {3.2, 15, 48}, bare=True),
    Task("percent-880", "calculate", "@agent What is 12.5 percent of 880?", says(110), "110",
         {12.5, 880, 110}, bare=True),
    Task("minutes-14h", "calculate", "@agent How many minutes are there in 14 hours?", says(840), "840",
         {14, 60, 840}, bare=True),
    Task("sleep-month", "calculate",
         "@agent I sleep 7.5 hours a night. How many hours is that in a 30-day month?", says(225), "225",
         {7.5, 30, 225}, bare=True),
    Task("bill-split-9", "calculate",
         "@agent We split a 1,260 EUR bill between 9 people. How much does each pay?", says(140), "140 EUR",
         {1260, 9, 140}, bare=True),
    Task("year-in-4", "datetime>calculate", "@agent What year will it be in 4 years?",
         says(lambda o: {y + 4 for y in this_year(o)}), "this year + 4",
         lambda o: clock_figures(o) | {4.0} | {y + 4 for y in this_year(o)}, bare=True),
    Task("water-boils", "none", "@agent At what temperature in Celsius does water boil at sea level?",
         says(100), "100", {100}, bare=True),
    Task("pride-prejudice", "none", "@agent Who wrote Pride and Prejudice?", mentions("Austen"),
         "Jane Austen", set(), bare=True),
]  # fmt: skip
#: The splits written after the first two, in the order they were written.
LATER = {"fresh": FRESH, "unseen": UNSEEN, "blind": BLIND, "sealed": SEALED, "final": FINAL, "last": LAST,
         "coda": CODA, "encore": ENCORE, "person": PERSON, "single": SINGLE, "plain": PLAIN,
         "brief": BRIEF, "morrow": MORROW, "nudge": NUDGE, "ledger": LEDGER, "plumb": PLUMB,
         "quarry": QUARRY, "sprig": SPRIG, "thicket": THICKET, "bramble": BRAMBLE, "moss": MOSS,
         "fen": FEN, "heath": HEATH, "reed": REED, "sedge": SEDGE, "fern": FERN, "frond": FROND,
         "grove": GROVE, "spore": SPORE, "thorn": THORN, "lichen": LICHEN, "husk": HUSK,
         "burr": BURR}  # fmt: skip
SPLITS = ("tune", "held-out", *LATER)


def split_of(index: int) -> str:
    """The fixed rule: in pairs of one kind, the first of a pair is tuned on, the second held out."""
    return "tune" if index % 2 == 0 else "held-out"


def tasks_of(split: str) -> list[tuple[str, Task]]:
    """The tasks of some splits (comma-separated, or ``all``), each with its split."""
    wanted = set(SPLITS) if split == "all" else set(split.split(","))
    if unknown := wanted - set(SPLITS):
        raise SystemExit(f"--split: no split {', '.join(sorted(unknown))} (splits: {', '.join(SPLITS)}, all)")
    paired = [(split_of(i), t) for i, t in enumerate(TASKS)]
    paired += [(name, t) for name, tasks in LATER.items() for t in tasks]
    return [(s, t) for s, t in paired if s in wanted]


# --- running --------------------------------------------------------------------------------------------


@dataclass
class Result:
    """One task's run, as written to the JSONL file."""

    model: str
    split: str
    id: str
    kind: str
    prompt: str
    ok: bool
    answer: str
    notes: list[str]
    calls: list[dict[str, Any]]
    rounds: int
    invalid: int  # calls written so that they could not run (ambiguous, unknown arguments)
    seconds: float
    approvals: int
    stop_reason: str | None
    history: bool
    results: str = "digest"
    baseline: float = 0.0  # the mean of the baselines run just before and just after this task's group
    started: str = ""
    ended: str = ""
    server: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    replies: list[str] = field(default_factory=list)  # what the model wrote each round, before parsing
    strict: bool = False  # done, as a person reads it: see strict_faults
    faults: list[str] = field(default_factory=list)
    catalog_tokens: int | None = None  # the catalog every model call of the turn read; None: not measured
    offered: list[str] | None = None  # the tools C0 offered the turn (None: every tool, or not recorded)
    earlier: list[str] = field(default_factory=list)  # the answers of the exchanges before it (--history)


async def run_task(graph: Any, model: ModelUnderTest, split: str, task: Task, history: bool) -> Result:
    """One task in a fresh thread (after two chat exchanges with ``history``), checked."""
    config = {"configurable": {"thread_id": f"chains-{uuid.uuid4().hex}"}}
    workspace = f"{WORKSPACE}-bare-{uuid.uuid4().hex[:8]}" if task.bare else WORKSPACE
    context = bench_context(workspace)
    records = PostgresRecords()
    earlier: list[str] = []
    if history:
        for text in HISTORY:
            values, _ = await plain_turn(graph, text, config, context)
            earlier.append(str(values["messages"][-1].content))
    before_notes = await records.notes(workspace, USER)
    before = await model.counters()
    started, clock = datetime.now().astimezone(), time.perf_counter()
    error, values, approvals = None, {}, 0
    try:
        values, approvals = await plain_turn(graph, task.prompt, config, context)
    except Exception as exc:  # a failed turn is a task not done; the run goes on
        error = f"{type(exc).__name__}: {exc}"[:500]
    seconds = time.perf_counter() - clock
    ended = datetime.now().astimezone()
    server = difference(await model.counters(), before)
    notes = (await records.notes(workspace, USER))[len(before_notes) :]
    turn = this_turn(values.get("messages") or [], task.prompt)
    asked = [m for m in turn if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls)]
    ran = {m.tool_call_id: sent_back(m) or m.status for m in turn if isinstance(m, ToolMessage)}
    calls = [
        {"name": c["name"], "args": c["args"], "status": ran.get(c["id"] or "", "not run")}
        for m in asked
        for c in m.tool_calls
    ]
    last = turn[-1] if turn else None
    answer = str(last.content) if isinstance(last, AIMessage) and not last.tool_calls else ""
    outcome = Outcome(answer, notes, started, ended, earlier)
    catalog_size = await catalog_tokens(model, context, values.get("decisions") or [])
    ok = error is None and task.check(outcome)
    faults = strict_faults(task, outcome, calls)
    return Result(
        model=model.short,
        split=split,
        id=task.id,
        kind=task.kind,
        prompt=task.prompt,
        ok=ok,
        strict=ok and not faults,
        faults=faults,
        answer=answer,
        notes=notes,
        calls=calls,
        rounds=len(asked),
        invalid=sum(len(m.invalid_tool_calls) for m in asked),
        seconds=round(seconds, 2),
        approvals=approvals,
        stop_reason=values.get("stop_reason"),
        history=history,
        earlier=earlier,
        results=results_as(None),
        started=started.isoformat(),
        ended=ended.isoformat(),
        server=server,
        error=error,
        replies=[str(m.response_metadata.get("prompted_text") or m.content) for m in asked + turn[-1:]],
        catalog_tokens=catalog_size,
        offered=offered_tools(values.get("decisions") or []),
    )


def offered_tools(decisions: list[dict[str, Any]]) -> list[str] | None:
    """The tools C0 chose for the turn, by its last decision (``None``: every tool, or no decision)."""
    chosen = [d["outcome"] for d in decisions if d.get("id") == "C0"]
    return chosen[-1].get("offered") if chosen and isinstance(chosen[-1], dict) else None


async def catalog_tokens(model: ModelUnderTest, context: Context, decisions: list[dict[str, Any]]) -> int:
    """Tokens of the catalog (instructions and tools) the turn offered, by C0's last decision of the turn.

    Every model call of a prompted turn reads the same catalog: C0 chooses once per turn.
    """
    if not any(d.get("id") == "C0" for d in decisions):
        return 0
    tools = (await Services(records=PostgresRecords()).toolset(context)).tools
    offered = offered_tools(decisions)
    offered = list(tools) if offered is None else offered
    shown = [tools[name] for name in offered if name in tools]
    return await model.tokens(catalog(shown)) if shown else 0


async def baseline(graph: Any, history: bool, n: int) -> float:
    """Seconds of the ``n``-th plain one-call task (a calculate call, then the answer), in a fresh thread."""
    config = {"configurable": {"thread_id": f"chains-base-{uuid.uuid4().hex}"}}
    context = bench_context()
    if history:
        for text in HISTORY:
            await plain_turn(graph, text, config, context)
    started = time.perf_counter()
    a, b = BASELINE[n % len(BASELINE)]
    values, _ = await plain_turn(graph, f"@agent What is {a}*{b}?", config, context)
    seconds = time.perf_counter() - started
    ok = a * b in numbers(str(values["messages"][-1].content))
    label = "warm-up" if n == 0 else "baseline"
    print(
        f"  {label} '@agent What is {a}*{b}?': {seconds:.1f} s{'' if ok else ' (answer wrong)'}", flush=True
    )
    return seconds


def summary(model: str, split: str, results: list[Result]) -> dict[str, Any]:
    """One row of the table; the ratio is the mean of each task's seconds over its neighbouring baselines."""
    n = len(results) or 1
    seconds = sum(r.seconds for r in results) / n
    timed = [r for r in results if r.baseline]
    return {
        "model": model,
        "split": split,
        "n": len(results),
        "done": sum(r.ok for r in results) / n,
        "strict": sum(r.strict for r in results) / n,
        "faults": sum(bool(r.faults) for r in results),
        "calls": sum(len(r.calls) for r in results) / n,
        "rounds": sum(r.rounds for r in results) / n,
        "seconds": seconds,
        "read": sum(r.server.get("read", 0) for r in results) / n,
        "baseline": statistics.median(r.baseline for r in timed) if timed else 0.0,
        "ratio": statistics.mean(r.seconds / r.baseline for r in timed) if timed else float("nan"),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    """The figures per model and split."""
    print(
        f"\n{'model':<6} {'split':<9} {'n':>3} {'done':>6} {'strict':>6} {'calls/task':>10} "
        f"{'rounds/task':>11} "
        f"{'s/task':>7} {'tokens read/task':>16} {'baseline s':>10} {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['model']:<6} {r['split']:<9} {r['n']:>3} {r['done']:>6.0%} {r['strict']:>6.0%} "
            f"{r['calls']:>10.2f} "
            f"{r['rounds']:>11.2f} {r['seconds']:>7.1f} {r['read']:>16.0f} "
            + (f"{r['baseline']:>10.1f} {r['ratio']:>5.1f}x" if r["baseline"] else f"{'-':>10} {'-':>6}")
        )
    print("done: the check's number or note; strict: done, and read as a person reads it (strict_faults)")
    print("ratio: each task's seconds over the one-call baselines run just before and after it, averaged")


def print_faults(results: list[Result]) -> None:
    """What the strict reading found across the run, by kind, and the median seconds by number of steps.

    A task's kind names its steps (``documents>calculate`` is two): one step or none against two or more is
    the split the issue's time goals are set on.
    """
    kinds = ("figure", "machinery shown", "unasked write", "unneeded tool", "earlier exchange")
    tally = {k: sum(any(f.startswith(k) for f in r.faults) for r in results) for k in kinds}
    print("tasks with a fault: " + ", ".join(f"{k} {n}" for k, n in tally.items()))
    for label, part in (
        ("one step or none", [r for r in results if ">" not in r.kind]),
        ("two or more steps", [r for r in results if ">" in r.kind]),
    ):
        if part:
            ratios = [r.seconds / r.baseline for r in part if r.baseline]
            ratio = f", {statistics.median(ratios):.2f}x the one-call baseline" if ratios else ""
            calls = sum(len(r.calls) for r in part) / len(part)
            seconds = statistics.median(r.seconds for r in part)
            print(
                f"median s, {label}: {seconds:.1f}{ratio}; tool calls/task {calls:.2f}{catalog_share(part)}"
            )


def catalog_share(results: list[Result]) -> str:
    """The catalog's share of the prompt tokens the tasks' model calls read (cached or not), if measured.

    A call's prompt is the catalog and the rest, and each of a task's ``rounds + 1`` calls reads the catalog
    (G3's second asking, rarely, reads one more prompt without it: the share is then a little high).
    """
    measured = [r for r in results if r.catalog_tokens is not None and r.server.get("read") is not None]
    if not measured:
        return ""
    catalog_read = sum(r.catalog_tokens * (r.rounds + 1) for r in measured)  # type: ignore[operator]
    prompt = sum(r.server.get("read", 0) + r.server.get("cached", 0) for r in measured)
    per_call = prompt / sum(r.rounds + 1 for r in measured)
    return (
        f"; prompt tokens/call {per_call:.0f}, the catalog's share {catalog_read / prompt:.0%}"
        if prompt
        else ""
    )


async def bench(options: argparse.Namespace) -> None:
    """Every model asked for: its baseline, the chosen tasks, the table and the JSONL details."""
    chosen = tasks_of(options.split)
    if options.only:
        wanted = set(options.only.split(","))
        chosen = [(split, t) for split, t in chosen if t.id in wanted]
    chosen = chosen[: options.limit or None]
    if options.bare:
        chosen = [
            (split, replace(t, bare=True)) for split, t in chosen if t.bare or "documents" not in t.kind
        ]
    rows = []
    every_result: list[Result] = []
    async with session("chains", options.out) as run_:
        results_read = results_as(options.results)
        print(f"{len(chosen)} task(s); a round's results read as {results_read}", flush=True)
        for short in options.model.split(","):
            with served(short) as model:
                run_.for_model()
                # the first turn loads the tool workers and fills the prompt cache: not a baseline
                await warm_up(model, baseline(run_.graph, options.history, 0))
                bases = [await baseline(run_.graph, options.history, 1)]
                results: list[Result] = []
                every = max(options.baseline_every, 1)
                for first in range(0, len(chosen), every):
                    group = []
                    for split, task in chosen[first : first + every]:
                        group.append(await run_task(run_.graph, model, split, task, options.history))
                        show(len(results) + len(group), len(chosen), group[-1])
                    # the machine's load drifts: each task is set against the baselines around its group
                    bases.append(await baseline(run_.graph, options.history, len(bases) + 1))
                    for result in group:
                        result.baseline = round((bases[-2] + bases[-1]) / 2, 2)
                        run_.write(asdict(result))
                    results.extend(group)
            for split in SPLITS:
                part = [r for r in results if r.split == split]
                if part:
                    rows.append(summary(short, split, part))
            if len({r.split for r in results}) > 1:
                rows.append(summary(short, "all", results))
            every_result.extend(results)
    print_table(rows)
    print_faults(every_result)
    print(f"details: {run_.path}")


def show(i: int, total: int, result: Result) -> None:
    """One task's progress line: its check, seconds, rounds, calls and what it said or saved."""
    shown = ", ".join(c["name"] for c in result.calls) or "no calls"
    shown += f" (+{result.invalid} invalid)" if result.invalid else ""
    said = (result.notes[-1] if result.notes else result.answer).replace("\n", " ")
    print(
        f"  [{i}/{total}] {result.id:<17} {'ok ' if result.ok else 'BAD'}"
        f"{'' if result.strict or not result.ok else ' (strict: ' + '; '.join(result.faults) + ')'}"
        f" {result.seconds:6.1f} s  "
        f"{result.rounds} round(s): {shown}  -> {said[:70]!r}"
        + (f"  {result.error[:80]}" if result.error else ""),
        flush=True,
    )


def rescore(path: Path) -> None:
    """Check an earlier run's answers and notes again with today's checks, and print its table."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_id = {t.id: t for t in TASKS + [t for tasks in LATER.values() for t in tasks]}
    results = []
    for row in rows:
        started, ended = (datetime.fromisoformat(row[k]) for k in ("started", "ended"))
        outcome = Outcome(row["answer"], row["notes"], started, ended, row.get("earlier", []))
        task = by_id[row["id"]]
        row["ok"] = row["error"] is None and task.check(outcome)
        row["faults"] = strict_faults(task, outcome, row["calls"])
        row["strict"] = row["ok"] and not row["faults"]
        print(
            f"  {row['model']:<5} {row['id']:<17} {'ok ' if row['ok'] else 'BAD'} {'; '.join(row['faults'])}"
        )
        results.append(Result(**{"invalid": 0, **row}))  # older files did not count invalid calls
    table = []
    for model in dict.fromkeys(r.model for r in results):
        for split in (*SPLITS, "all"):
            part = [r for r in results if r.model == model and split in ("all", r.split)]
            if part:
                table.append(summary(model, split, part))
    print_table(table)
    print_faults(results)


def _without_check_figures() -> None:
    from workspace_agent.nodes import check_figures

    check_figures.problems = lambda *_args: ([], False)  # type: ignore[assignment]


def _without_calculate_operands() -> None:
    from workspace_agent.nodes import approve

    approve.unsourced_operands = lambda *_args: []  # type: ignore[assignment]


#: Rules of the prompted loop (``providers/prompted/rules.py``, the steering ones) and G3's two checks (of
#: the answer, of ``calculate``'s operands), which ``--without`` switches off for one run.
RULES: dict[str, Callable[[], None]] = {
    **{r.name: partial(rules.off.add, r.name) for r in rules.RULES if r.steers},
    "check_figures": _without_check_figures,
    "calculate_operands": _without_calculate_operands,
}


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("LOCAL_MODEL") or "1.5b", help="0.5b, 1.5b or both")
    splits = ", ".join(SPLITS)
    parser.add_argument("--split", default="all", help=f"{splits}; several (tune,held-out), all")
    parser.add_argument("--history", action="store_true", help="two earlier chat exchanges in each thread")
    parser.add_argument(
        "--bare",
        action="store_true",
        help="each task in an empty workspace of its own; document tasks left out",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks of the split")
    parser.add_argument("--only", default="", help="only these tasks (ids, comma-separated)")
    parser.add_argument("--baseline-every", type=int, default=4, help="a baseline after every N tasks")
    parser.add_argument("--out", default=None, help="JSONL details (default: the data folder's bench/)")
    parser.add_argument("--results", choices=["digest", "messages"], default=None, help=RESULTS_HELP)
    parser.add_argument("--rescore", default=None, help="check an earlier run's JSONL again instead")
    parser.add_argument(
        "--without", default="", help=f"rules switched off, to measure each on its own: {', '.join(RULES)}"
    )
    options = parser.parse_args()
    for rule in filter(None, options.without.split(",")):
        if rule not in RULES:
            raise SystemExit(f"--without: no rule {rule!r} (rules: {', '.join(RULES)})")
        RULES[rule]()
        print(f"without {rule}", flush=True)
    if options.rescore:
        rescore(Path(options.rescore))
    else:
        run(bench(options))


if __name__ == "__main__":
    main()
