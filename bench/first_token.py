"""Time to the first streamed token of the agent graph on the embedded local models, per model call.

Four measurements, each in fresh threads of the real graph (PostgreSQL saver, sample workspace, the model
served by this process as in ``bench/chains.py``):

- (a) a chat turn ("hello"-like): seconds from sending to its first streamed token;
- (b) an ``@agent`` turn's answer, the text written after a tool round: seconds from sending;
- (c) round 2 of that two-round turn (the answer after the tool result) against round 1 (the tool call);
- (d) turn 5 of one thread of chat turns against its turn 1.

A round's time to first token is the graph's ``{"progress": "writing"}`` custom event minus its
``{"progress": "reading"}`` event (sent when a model request goes out and when its first token arrives).
A graph without those events is timed from the end of ``trim`` (the node before ``call_model``) to the first
``messages`` chunk streamed from ``call_model``; a reply that is not streamed (prompted tool calls are asked
for whole) has no first token on the client, and its row says so. Either way the server's own figures are
printed beside it: the prompt tokens llama.cpp read and took from its cache and the seconds it spent
reading, from its ``/metrics`` counters around each ``call_model`` (only this process uses the server).

Every run asks other questions (llama.cpp keeps earlier prompts' states in memory and would serve a repeat
whole), in this order: the chat turn, then the ``@agent`` turn, so its round 1 follows a chat turn, as a
person's first ``@agent`` message after chatting does.

The goals (DESIGN §4, issue 18): round 2 reads at most 25 % of round 1's prompt tokens when the tool result
is under 200 tokens, and round 2 and later turns take at most half of round 1's time to first token.

Run: ``python bench/first_token.py --model 0.5b,1.5b --runs 2`` (medians of the runs; details as JSONL under
the data folder's ``bench/``).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from chains import (
    RESULTS_HELP,
    ModelUnderTest,
    approve_all,
    bench_context,
    difference,
    results_as,
    served,
    session,
    warm_up,
)
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.types import Command

from workspace_agent.checkpoints.db import run

#: Things to ask about in chat turns: each turn asks about another, so no prompt is a repeat that llama.cpp's
#: prompt cache (it keeps earlier prompts' states in memory) would serve whole.
THINGS = (
    "lighthouse harbour tide buoy compass glacier volcano canyon meadow delta fjord lagoon reef dune geyser "
    "marsh prairie tundra atoll estuary plateau ravine moraine cove"
).split()
#: Products the @agent turns ask for, one per run (the first for the warm-up).
PRODUCTS = [(17, 19), (12, 34), (23, 47), (31, 29), (46, 13), (52, 27), (38, 61), (44, 44)]


def chat_text(n: int) -> str:
    """The ``n``-th chat question (a short answer is asked for, so a turn costs seconds, not minutes)."""
    return f"Hello! In one short sentence: what is a {THINGS[n % len(THINGS)]}?"


def agent_text(n: int) -> str:
    """The ``n``-th @agent question: one calculate call, then the answer."""
    a, b = PRODUCTS[n % len(PRODUCTS)]
    return f"@agent What is {a}*{b}?"


@dataclass
class Round:
    """One ``call_model`` step: when it began, its events, its first streamed token, the server's figures."""

    start: float
    reading: float | None = None
    writing: float | None = None
    first_chunk: float | None = None
    end: float | None = None
    tools: bool = False
    server: dict[str, float] = field(default_factory=dict)
    usage: dict[str, Any] | None = None  # what the reply message carries about tokens, if anything

    @property
    def ttft(self) -> float | None:
        """Seconds to the first token: the progress events' difference, else first chunk after trim."""
        if self.reading is not None and self.writing is not None:
            return self.writing - self.reading
        if self.first_chunk is not None:
            return self.first_chunk - self.start
        return None

    @property
    def server_ttft(self) -> float | None:
        """The server's reading seconds plus one written token's: its own time to a first token."""
        if not self.server:
            return None
        per_token = self.server.get("written_s", 0) / max(self.server.get("written", 0), 1)
        return self.server.get("prompt_s", 0) + per_token


@dataclass
class Turn:
    """One turn, streamed: its rounds and when its answer's first text token arrived."""

    text: str
    sent: float
    rounds: list[Round] = field(default_factory=list)
    answer_first: float | None = None
    answer: str = ""
    events: bool = False  # the graph sent progress events

    @property
    def to_answer(self) -> float | None:
        """Seconds from sending to the first streamed token of the answer's text."""
        return None if self.answer_first is None else self.answer_first - self.sent


def _usage(message: AIMessage) -> dict[str, Any] | None:
    """The token figures a reply message carries (usage_metadata, else response_metadata's token_usage)."""
    return message.usage_metadata or message.response_metadata.get("token_usage")  # type: ignore[return-value]


async def warm_turns(graph: Any, model: ModelUnderTest) -> None:
    """A chat turn and an ``@agent`` turn, untimed."""
    for text in ("Hi! In one short sentence: what is a river?", agent_text(0)):
        await streamed_turn(graph, model, text, f"ttft-{uuid.uuid4().hex}")


async def streamed_turn(graph: Any, model: ModelUnderTest, text: str, thread: str) -> Turn:
    """Run one turn with ``astream`` (messages, custom, updates), approving any request, timing each round."""
    config = {"configurable": {"thread_id": thread}}
    context = bench_context()
    payload: Any = {"messages": [{"role": "user", "content": text}]}
    counters = await model.counters()
    turn, current = Turn(text, time.perf_counter()), None
    modes = ["messages", "custom", "updates"]
    while True:
        interrupted = None
        async for mode, data in graph.astream(payload, config, context=context, stream_mode=modes):
            now = time.perf_counter()
            if mode == "custom" and isinstance(data, dict) and data.get("progress") in ("reading", "writing"):
                turn.events = True
                current = current or Round(start=now)
                if data["progress"] == "reading" and current.reading is None:
                    current.reading = now
                elif data["progress"] == "writing" and current.writing is None:
                    current.writing = now
            elif mode == "messages":
                chunk, meta = data
                streamed = isinstance(chunk, AIMessageChunk) and (chunk.content or chunk.tool_call_chunks)
                if meta.get("langgraph_node") != "call_model" or not streamed:
                    continue
                current = current or Round(start=now)
                current.first_chunk = current.first_chunk or now
                if chunk.content and turn.answer_first is None:
                    turn.answer_first = now
            elif mode == "updates":
                if "__interrupt__" in data:
                    interrupted = data["__interrupt__"][0].value
                if "trim" in data:
                    current = Round(start=now)
                if "call_model" in data:
                    current = current or Round(start=now)
                    after = await model.counters()
                    current.end, current.server, counters = now, difference(after, counters), after
                    replies = [
                        m for m in (data["call_model"] or {}).get("messages", []) if isinstance(m, AIMessage)
                    ]
                    current.tools = any(m.tool_calls for m in replies)
                    current.usage = _usage(replies[-1]) if replies else None
                    if replies and not current.tools:
                        turn.answer = str(replies[-1].content)
                    turn.rounds.append(current)
                    current = None
        if interrupted is None:
            return turn
        payload = Command(resume=approve_all(interrupted))


@dataclass
class Sample:
    """One run's figures for one model."""

    chat: Turn
    agent: Turn
    thread: list[Turn]


async def sample(graph: Any, model: ModelUnderTest, n: int) -> Sample:
    """(a), (b, c) and (d) once, each in fresh threads, asking run ``n``'s questions."""
    chat = await streamed_turn(graph, model, chat_text(6 * n), f"ttft-{uuid.uuid4().hex}")
    agent = await streamed_turn(graph, model, agent_text(n + 1), f"ttft-{uuid.uuid4().hex}")
    thread, turns = f"ttft-{uuid.uuid4().hex}", []
    for k in range(1, 6):
        turns.append(await streamed_turn(graph, model, chat_text(6 * n + k), thread))
    return Sample(chat, agent, turns)


def _prompt(round_: Round) -> float | None:
    """The tokens of a round's prompts: those read and those taken from the cache."""
    return round_.server.get("read", 0) + round_.server.get("cached", 0) if round_.server else None


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _s(value: float | None, missing: str = "not streamed") -> str:
    return f"{value:.2f} s" if value is not None else missing


def _ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}x" if top is not None and bottom else "-"


def report(short: str, samples: list[Sample]) -> None:
    """The medians of the runs: first tokens, server reading, tokens read, and the goals' ratios."""

    def rounds(pick: Callable[[Sample], Round | None]) -> list[Round]:
        return [r for r in map(pick, samples) if r is not None]

    def line(label: str, chosen: list[Round], from_send: list[float | None] | None = None) -> None:
        sent = _s(_median(from_send), "-") if from_send is not None else ""
        print(
            f"  {label:<40} {sent:>10} {_s(_median([r.ttft for r in chosen])):>13} "
            f"{_s(_median([r.server_ttft for r in chosen]), '-'):>10} "
            f"{_median([r.server.get('read') for r in chosen]) or 0:>7.0f} "
            f"{_median([_prompt(r) for r in chosen]) or 0:>7.0f}"
        )

    def ratio(label: str, top: list[Round], bottom: list[Round], goal: str) -> None:
        client = _ratio(_median([r.ttft for r in top]), _median([r.ttft for r in bottom]))
        server = _ratio(_median([r.server_ttft for r in top]), _median([r.server_ttft for r in bottom]))
        read = _median([r.server.get("read") for r in top])
        of_read = _ratio(read, _median([r.server.get("read") for r in bottom]))
        of_prompt = _ratio(read, _median([_prompt(r) for r in bottom]))
        print(f"  {label:<40} {'':>10} {client:>13} {server:>10} {of_read:>7} {of_prompt:>7}   {goal}")

    first = rounds(lambda s: s.agent.rounds[0] if s.agent.rounds else None)
    second = rounds(lambda s: s.agent.rounds[1] if len(s.agent.rounds) > 1 else None)
    turn1 = rounds(lambda s: s.thread[0].rounds[-1] if s.thread[0].rounds else None)
    turn5 = rounds(lambda s: s.thread[-1].rounds[-1] if s.thread[-1].rounds else None)
    events = any(s.agent.events or s.chat.events for s in samples)
    how = "progress events" if events else "trim's end to the first streamed chunk (no progress events)"
    print(f"\nmodel {short}: medians of {len(samples)} run(s); client first token from {how}")
    print(
        f"  {'':<40} {'from send':>10} {'first token':>13} {'server':>10} {'read':>7} {'prompt':>7}"
        "   (server: llama.cpp's reading seconds + one token; read: prompt tokens not in its cache)"
    )
    line("(a) chat turn", rounds(lambda s: s.chat.rounds[-1] if s.chat.rounds else None),
         [s.chat.to_answer for s in samples])  # fmt: skip
    line("(b) @agent answer (after a tool round)", second, [s.agent.to_answer for s in samples])
    line("(c) round 1: the tool call", first)
    line("    round 2: the answer", second)
    gaps = [
        s.agent.rounds[1].start - (s.agent.rounds[0].end or 0) for s in samples if len(s.agent.rounds) > 1
    ]
    print(f"  {'    between them: approval, tool, trim':<40} {_s(_median(gaps), '-'):>10}")
    print(f"  {'ratios (read: of read; prompt: read of the prompt)':<40}")
    ratio(
        "    round 2 / round 1", second, first, "goal: read <= 0.25x of round 1's prompt, first token <= 0.5x"
    )
    line("(d) turn 1 of a chat thread", turn1)
    line("    turn 5 of that thread", turn5)
    ratio("    turn 5 / turn 1", turn5, turn1, "goal: first token <= 0.5x")
    rounds_per_turn = [len(s.agent.rounds) for s in samples]
    tools_rounds = [sum(r.tools for r in s.agent.rounds) for s in samples]
    print(f"  @agent turn: model calls {rounds_per_turn}, of which asked for tools {tools_rounds}")
    usage = [(r.tools, r.usage is not None, r.first_chunk is not None) for r in samples[0].agent.rounds]
    print(
        "  reply messages carrying token usage (tools?, usage?, streamed?): "
        + ", ".join(f"({'tools' if t else 'text'}, {u}, {s})" for t, u, s in usage)
    )


async def bench(options: argparse.Namespace) -> None:
    """Every model asked for: a warm-up turn, then ``--runs`` samples, printed and written as JSONL."""
    async with session("first-token", options.out) as run_:
        print(f"a round's results read as {results_as(options.results)}", flush=True)
        for short in options.model.split(","):
            samples = []
            with served(short) as model:
                run_.for_model()
                # the first requests after loading are slower, and the first tool call starts the tool
                # workers: a running server has done both
                await warm_up(model, warm_turns(run_.graph, model))
                for n in range(options.runs):
                    started = time.perf_counter()
                    one = await sample(run_.graph, model, n)
                    samples.append(one)
                    run_.write({"model": short, "run": n, **asdict(one)})
                    print(
                        f"  run {n + 1}/{options.runs}: {time.perf_counter() - started:.0f} s; "
                        f"@agent answer {one.agent.answer[:60]!r}",
                        flush=True,
                    )
            report(short, samples)
    print(f"\ndetails: {run_.path}")


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="0.5b,1.5b", help="0.5b, 1.5b or both (comma-separated)")
    parser.add_argument("--runs", type=int, default=2, help="samples per model (medians printed)")
    parser.add_argument("--out", default=None, help="JSONL details (default: the data folder's bench/)")
    parser.add_argument("--results", choices=["digest", "messages"], default=None, help=RESULTS_HELP)
    options = parser.parse_args()
    run(bench(options))


if __name__ == "__main__":
    main()
