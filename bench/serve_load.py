"""Load through the real servers: N concurrent threads, each 3 turns with an approval, via ``langgraph_sdk``.

Configurations, measured in one run on one fresh embedded PostgreSQL, with the scripted OpenAI-compatible
server answering every model call after ``--latency`` seconds:

- ``langgraph dev`` as a developer starts it (the baseline of the ratios);
- ``make serve`` with 1 instance, and with 2 instances sharing Redis (clients spread over both).

A turn is: send the message, the model asks for ``save_note``, the approval interrupt is answered (approve),
the model answers. Its latency is from sending the message to the answer, approval round trip included.
Per configuration it prints ok / failed / lost turns, p50 / p95 turn latency and throughput, and the ratios
against ``langgraph dev``. *lost* counts turns that returned an answer but left no chat-log row, and
approvals still pending at the end: what a server must never do.

Run: ``make serve-setup && .venv/bin/python bench/serve_load.py [--threads 50,200] [--latency 0.2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from langgraph_sdk.client import LangGraphClient

from workspace_agent.samples.scripted_model import ScriptedLLM, last_user_text, text_reply, tool_reply

ROOT = Path(__file__).resolve().parents[1]
TURNS = 3
TURN_TIMEOUT = 600.0


def rule_with_latency(latency: float):
    def rule(request: dict) -> dict:
        messages = request.get("messages", [])
        if messages and messages[-1].get("role") == "tool":
            return {**text_reply("noted"), "delay": latency}
        return {**tool_reply(("save_note", {"text": last_user_text(request)})), "delay": latency}

    return rule


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 180) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"), re.M)
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')[-3000:]}")


def served_env(db_url: str, model_url: str) -> dict[str, str]:
    """The servers' environment: this database, the scripted model, no keys, Redis, traces or memory job."""
    return {
        **{k: v for k, v in os.environ.items() if k not in ("WORKSPACE_AGENT_API_KEYS", "REDIS_URL")},
        "DATABASE_URL": db_url,
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "bench",
        "CHAT_MODEL": "scripted",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "MEMORY_EXTRACTION_INTERVAL": "off",
        "LOG_LEVEL": "WARNING",
    }


def start_dev(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, list[str]]:
    cli = Path(sys.executable).with_name("langgraph")
    cmd = [str(cli), "dev", "--no-browser", "--no-reload", "--port", str(free_port())]
    cmd += ["--config", "langgraph.json"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = wait_for(log, r"API: \S*?(http://127\.0\.0\.1:\d+)", proc).group(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return proc, [url]
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("langgraph dev never answered /ok")


def start_serve(env: dict[str, str], log: Path, instances: int) -> tuple[subprocess.Popen, list[str]]:
    python = ROOT / ".venv-serve" / "bin" / "python"
    if not python.exists():
        raise SystemExit("no .venv-serve: run `make serve-setup` first")
    env = {**env, "SERVE_INSTANCES": str(instances), "SERVE_PORT": str(free_port())}
    env["SERVE_LOG_DIR"] = str(log.parent / f"serve-{instances}")
    cmd = [str(python), "-m", "workspace_agent.server.serve"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, wait_for(log, r"^ready: (.+)$", proc).group(1).split()


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Result:
    """One configuration at one size: turn counts and latencies."""

    name: str
    threads: int
    ok: int = 0
    failed: int = 0
    lost: int = 0
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_thread(client: LangGraphClient, workspace: str, i: int, result: Result) -> None:
    thread = await client.threads.create()
    tid, context = thread["thread_id"], {"workspace": workspace}
    for t in range(TURNS):
        started = time.perf_counter()
        try:
            payload = {"messages": [{"role": "user", "content": f"thread {i} turn {t}"}]}
            await client.runs.wait(tid, "agent", input=payload, context=context)
            state = await client.threads.get_state(tid)
            if state["next"] != ["approve"]:
                raise RuntimeError(f"no approval pending: next={state['next']}")
            out = await client.runs.wait(
                tid, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}, context=context
            )
            if not isinstance(out, dict) or out.get("stop_reason") != "answered":
                raise RuntimeError(f"turn did not end answered: {str(out)[:200]}")
            result.latencies.append(time.perf_counter() - started)
            result.ok += 1
        except Exception as exc:  # counted and reported; the thread stops: its next turn would mean nothing
            result.failed += TURNS - t
            result.errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
            return
    if (await client.threads.get_state(tid))["next"]:  # every turn answered, yet something still waits
        result.lost += 1


def client_for(url: str) -> LangGraphClient:
    http = httpx.AsyncClient(
        base_url=url,
        transport=httpx.AsyncHTTPTransport(retries=5, limits=httpx.Limits(max_connections=None)),
        timeout=httpx.Timeout(TURN_TIMEOUT, connect=30),
        headers={"Content-Type": "application/json"},
    )
    return LangGraphClient(http)


async def load(name: str, urls: list[str], threads: int, db_url: str) -> Result:
    workspace = f"load-{uuid.uuid4().hex[:8]}"
    result = Result(name, threads)
    clients = [client_for(u) for u in urls]
    started = time.perf_counter()
    await asyncio.gather(
        *(one_thread(clients[i % len(clients)], workspace, i, result) for i in range(threads))
    )
    result.seconds = time.perf_counter() - started
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM chat_log WHERE workspace = %s", (workspace,)).fetchone()
    logged = row[0] if row else 0
    result.lost += max(0, result.ok - logged)
    for client in clients:
        await client.http.client.aclose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="50,200")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--configs", default="dev,serve1,serve2")
    args = parser.parse_args()
    sizes = [int(x) for x in args.threads.split(",")]
    home = Path(tempfile.mkdtemp(prefix="serve-load-"))
    os.environ["WORKSPACE_AGENT_HOME"] = str(home)
    from workspace_agent.checkpoints.embedded import database_url, stop_embedded

    db_url = database_url()
    llm = ScriptedLLM(rule=rule_with_latency(args.latency)).start()
    env = served_env(db_url, llm.base_url)
    starters = {
        "dev": ("langgraph dev", lambda log: start_dev(env, log)),
        "serve1": ("make serve, 1 instance", lambda log: start_serve(env, log, 1)),
        "serve2": ("make serve, 2 instances + Redis", lambda log: start_serve(env, log, 2)),
    }
    results: list[Result] = []
    try:
        for key in args.configs.split(","):
            name, start = starters[key]
            proc, urls = start(home / f"{key}.log")
            try:
                for n in sizes:
                    result = asyncio.run(load(name, urls, n, db_url))
                    results.append(result)
                    print(f"  {name}, {n} threads: done in {result.seconds:.1f} s", flush=True)
            finally:
                stop(proc)
    finally:
        llm.stop()
        stop_embedded()
    report(results, args.latency)


def report(results: list[Result], latency: float) -> None:
    print(f"\n{TURNS} turns per thread, each with one approval; model latency {latency * 1000:.0f} ms a call")
    head = f"{'server':<34}{'threads':>8}{'ok':>6}{'failed':>8}{'lost':>6}{'p50 s':>8}{'p95 s':>8}"
    print(head + f"{'turns/s':>9}{'p50 ×dev':>10}{'p95 ×dev':>10}{'tput ×dev':>10}")
    base = {r.threads: r for r in results if r.name == "langgraph dev"}
    for r in results:
        tput = r.ok / r.seconds if r.seconds else 0.0
        line = f"{r.name:<34}{r.threads:>8}{r.ok:>6}{r.failed:>8}{r.lost:>6}"
        line += f"{r.pct(0.5):>8.2f}{r.pct(0.95):>8.2f}{tput:>9.1f}"
        b = base.get(r.threads)
        if b and b.latencies and r.latencies:
            btput = b.ok / b.seconds
            line += f"{r.pct(0.5) / b.pct(0.5):>10.2f}{r.pct(0.95) / b.pct(0.95):>10.2f}{tput / btput:>10.2f}"
        print(line)
    for r in results:
        for e in sorted(set(r.errors))[:3]:
            print(f"  {r.name} / {r.threads}: {e}")


if __name__ == "__main__":
    main()
