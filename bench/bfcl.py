"""The embedded local model's prompted tool calls, scored on the Berkeley Function Calling Leaderboard.

The questions and possible answers ship as JSON inside the ``bfcl-eval`` wheel, which is downloaded (never
installed: it pulls in torch) into the data folder's cache on first run. Each question's functions become
tools with a JSON-schema dict, as MCP tools are; the project's own prompted path
(``providers.prompted.prompted_turn``) asks the embedded model, and ``bfcl_ast`` scores the calls it produced.
The baseline is the whole run's figure per category: accuracy, calls produced against calls expected, and
seconds per question. Every raw reply is written to a JSONL file for reading.

Run: ``python bench/bfcl.py --categories live_simple,live_parallel --sample 20`` (needs the ``local`` extra);
``--grammar off`` and ``--reopen off`` measure the path without the call grammar or without reopening;
``LOCAL_MODEL=0.5b`` measures the smaller pinned model.
The sample is deterministic (seeded), so two runs of the same options ask the same questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from bfcl_ast import reply_ok
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import StructuredTool

from workspace_agent.core.context import Context
from workspace_agent.core.plan import render_system
from workspace_agent.core.settings import model_settings
from workspace_agent.providers import prompted
from workspace_agent.providers.chat.models import chat_model
from workspace_agent.providers.local.local_model import ensure_local_model_server
from workspace_agent.providers.paths import data_home
from workspace_agent.providers.prompted import call_parsing, catalog

os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("MODEL_TIMEOUT", "900")  # one slow reply on a loaded machine is not a wrong answer
WHEEL = "bfcl-eval==2026.3.23"
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
HELD_OUT = ["simple_python", "multiple", "parallel", "parallel_multiple"]
#: BFCL's type names as JSON schema has them.
WINDOW = 4096  # the embedded model's window (providers.local.local_model.DEFAULT_CONTEXT)
JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string", "list": "array"}


def wheel_path() -> Path:
    """The wheel in the data folder's cache, downloaded with pip the first time."""
    folder = data_home() / "bfcl"
    found = sorted(folder.glob("bfcl_eval-*.whl"))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", str(folder)]
        subprocess.run(command, check=True)
        found = sorted(folder.glob("bfcl_eval-*.whl"))
    return found[-1]


def load(category: str) -> list[dict[str, Any]]:
    """The questions of one category with their ground truth, read from inside the wheel."""
    with zipfile.ZipFile(wheel_path()) as wheel:

        def lines(name: str) -> list[dict[str, Any]]:
            return [json.loads(x) for x in wheel.read(f"bfcl_eval/data/{name}").decode().splitlines() if x]

        truth = {a["id"]: a["ground_truth"] for a in lines(f"possible_answer/BFCL_v4_{category}.json")}
        return [{**q, "truth": truth[q["id"]]} for q in lines(f"BFCL_v4_{category}.json")]


def sample(questions: list[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """A fixed sample: the same ids for the same size and seed, in file order."""
    if size <= 0 or size >= len(questions):
        return questions
    keep = set(random.Random(seed).sample(range(len(questions)), size))
    return [q for i, q in enumerate(questions) if i in keep]


def json_schema(spec: Any) -> Any:
    """A BFCL parameter description as JSON schema (``dict`` → ``object``, ``float`` → ``number`` …)."""
    if isinstance(spec, list):
        return [json_schema(s) for s in spec]
    if not isinstance(spec, dict):
        return spec
    out = {k: json_schema(v) for k, v in spec.items()}
    if isinstance(spec.get("type"), str):
        out["type"] = JSON_TYPES.get(spec["type"], spec["type"])
    if isinstance(spec.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in spec["properties"].items()}
    return out


def as_tool(function: dict[str, Any]) -> StructuredTool:
    """A BFCL function as a tool carrying a JSON-schema dict, the shape MCP tools have; it never runs."""

    def never(**_: Any) -> str:
        raise RuntimeError("BFCL functions are scored, not run")

    return StructuredTool(
        name=function["name"],
        description=function.get("description", ""),
        args_schema=json_schema(function["parameters"]),
        func=never,
    )


#: A short unrelated earlier conversation, put before each question with ``--history``: a thread's state after
#: two ordinary exchanges, which once turned the model away from its tools.
EARLIER = [
    ("hello", "Hello! How can I help you today?"),
    ("what is the capital of France?", "The capital of France is Paris."),
]


def request_of(question: dict[str, Any], history: bool = False) -> list[BaseMessage]:
    """The question's first turn, under the project's default system prompt unless it brings its own."""
    turn = question["question"][0]
    messages: list[BaseMessage] = [
        SystemMessage(m["content"]) if m["role"] == "system" else HumanMessage(m["content"]) for m in turn
    ]
    if not isinstance(messages[0], SystemMessage):
        messages.insert(0, SystemMessage(render_system(Context(workspace="bench"))))
    if history:
        messages[1:1] = [m for user, answer in EARLIER for m in (HumanMessage(user), AIMessage(answer))]
    return messages


class Replies(AsyncCallbackHandler):
    """Keeps the raw text of every model reply, so a run's replies can be read and reused as test data."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def on_llm_end(self, response: Any, **_: Any) -> None:
        self.texts.append(response.generations[0][0].text)


async def ask(
    model: Any, question: dict[str, Any], max_tokens: int, grammar: bool = False, history: bool = False
) -> dict[str, Any]:
    """One question through the project's prompted path: the calls, the raw replies, the seconds."""
    tools = [as_tool(f) for f in question["function"]]
    replies = Replies()
    started = time.perf_counter()
    error = None
    try:
        turn = await prompted.prompted_turn(
            model.with_config(callbacks=[replies]),
            request_of(question, history),
            tools,
            max_tokens=max_tokens,
            window=WINDOW,
            grammar=grammar,
        )
        message = turn.message
        calls = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
        invalid = len(message.invalid_tool_calls)
    except Exception as exc:  # a refused request (too long for the window) scores as a wrong answer
        calls, invalid, error = [], 0, f"{type(exc).__name__}: {exc}"[:300]
    seconds = time.perf_counter() - started
    ok = reply_ok(calls, question["function"], question["truth"])
    return {
        "id": question["id"],
        "ok": ok,
        "calls": calls,
        "invalid": invalid,
        "expected": len(question["truth"]),
        "seconds": seconds,
        "replies": replies.texts,
        "error": error,
    }


async def run(options: argparse.Namespace) -> None:
    """Ask every sampled question of every category, print the table, write the replies."""
    server = ensure_local_model_server()
    os.environ["OPENAI_BASE_URL"] = server.base_url
    os.environ.setdefault("OPENAI_API_KEY", "local")
    model = chat_model(server.model_name)
    print(f"model: {server.model_name}", flush=True)
    out = Path(options.out or data_home() / "bfcl" / f"replies-{options.label}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with out.open("w", encoding="utf-8") as sink:  # noqa: ASYNC230 - a bench, one writer, line by line
        for category in options.categories.split(","):
            questions = sample(load(category), options.sample, options.seed)
            histories = {"off": [False], "on": [True], "both": [False, True]}[options.history]
            results: dict[bool, list[dict[str, Any]]] = {h: [] for h in histories}
            for question in questions:
                for history in histories:  # both forms of a question back to back: the same machine load
                    result = await ask(model, question, options.max_tokens, options.grammar == "on", history)
                    results[history].append(result)
                    line = {"category": category, "history": history, **result}
                    sink.write(json.dumps(line, ensure_ascii=False) + "\n")
                    sink.flush()
                    if options.verbose:
                        mark = "ok " if result["ok"] else "BAD"
                        shown = json.dumps(result["calls"], ensure_ascii=False)[:150]
                        where = "+history " if history else ""
                        print(
                            f"  {result['id']:<34} {where}{mark} {result['seconds']:5.1f}s {shown}",
                            flush=True,
                        )
            for history in histories:
                rows.append(_row(category + (" +history" if history else ""), results[history]))
                print(_format(rows[-1]), flush=True)
    total = _row("all", [r for row in rows for r in row["results"]])
    print(_format(total))
    print(f"replies written to {out}")


def rescore(path: Path) -> None:
    """Score the replies of an earlier run again with today's parser: what reading every call alone buys.

    Only the first reply of each question is read (a reply naming an unknown tool was asked again), so this
    isolates the parser from the catalog, which shaped those replies.
    """
    by_category: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        by_category.setdefault(json.loads(line)["category"], []).append(json.loads(line))
    for category, rows in by_category.items():
        questions = {q["id"]: q for q in load(category)}
        results = []
        for row in rows:
            question, text = questions[row["id"]], (row["replies"] or [""])[0]
            tools = {t.name: catalog.schema_of(t) for t in map(as_tool, question["function"])}
            params = {n: tuple(s.get("properties") or ()) for n, s in tools.items()}
            found, _ = call_parsing.parse_reply(text, params)
            calls = [{"name": c["name"], "args": catalog.coerce(c["args"], tools[c["name"]])} for c in found]
            ok = reply_ok(calls, question["function"], question["truth"])
            results.append({**row, "ok": ok, "calls": calls, "error": None})
        print(_format(_row(f"{category} (re-read)", results)))


def _row(category: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(results) or 1
    return {
        "category": category,
        "results": results,
        "n": len(results),
        "accuracy": sum(r["ok"] for r in results) / n,
        "produced": sum(len(r["calls"]) for r in results) / n,
        "expected": sum(r["expected"] for r in results) / n,
        "seconds": sum(r["seconds"] for r in results) / n,
        "errors": sum(r["error"] is not None for r in results),
    }


def _format(row: dict[str, Any]) -> str:
    return (
        f"{row['category']:<24} n={row['n']:<4} accuracy {row['accuracy']:6.1%}   calls/question "
        f"{row['produced']:.2f} produced vs {row['expected']:.2f} expected "
        f"(ratio {row['produced'] / max(row['expected'], 1e-9):.2f})   {row['seconds']:5.1f} s/question"
        + (f"   {row['errors']} request error(s)" if row["errors"] else "")
    )


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--categories", default=",".join(LIVE), help=f"comma-separated; held out: {HELD_OUT}")
    parser.add_argument("--sample", type=int, default=20, help="questions per category (0 = all)")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=Context().reply_reserve, help="reply limit")
    parser.add_argument(
        "--grammar",
        choices=["on", "off"],
        default="on" if model_settings().call_grammar else "off",
        help="send the llama.cpp call grammar (default: as the model settings say, on for the local model)",
    )
    parser.add_argument(
        "--reopen",
        choices=["on", "off"],
        default="on",
        help="reopen a list closed while the model gave another call a chance (prompted.more_calls)",
    )
    parser.add_argument(
        "--history",
        choices=["off", "on", "both"],
        default="off",
        help="two unrelated earlier exchanges before each question (both: each question with and without)",
    )
    parser.add_argument("--label", default="run", help="names the replies file")
    parser.add_argument("--out", default=None, help="replies file (JSONL)")
    parser.add_argument("--verbose", action="store_true", help="one line per question")
    parser.add_argument("--rescore", default=None, help="re-read an earlier run's replies file instead")
    options = parser.parse_args()
    if options.reopen == "off":
        prompted.CONTINUE_AT = math.inf  # no close is doubtful enough: the list is read as written
    if options.rescore:
        rescore(Path(options.rescore))
    else:
        asyncio.run(run(options))


if __name__ == "__main__":
    main()
