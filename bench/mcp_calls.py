"""Per-call cost of an MCP tool: our held session on the hub's thread against langchain-mcp-adapters' paths.

Three ways to call the same stdio server's ``echo``, measured in the same run:

- baseline: adapters' ``load_mcp_tools(session)`` on a session held open in the caller's own loop (the
  cheapest possible call, but the session is bound to that loop, so a graph served on several loops
  cannot use it);
- ours: the tool ``load_mcp`` offers (adapters' conversion, the call relayed to the sessions' thread);
- adapters' ``MultiServerMCPClient.get_tools()``: a new session, a new server process, on every call.

Run: ``python bench/mcp_calls.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from common import median_ms, timed
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from workspace_agent.skills.mcp import close_mcp, load_mcp

SERVER = str(Path(__file__).with_name("mcp_echo_server.py"))


async def samples(tool: object, calls: int) -> list[float]:
    await tool.ainvoke({"text": "warm"})  # type: ignore[attr-defined]
    return [await timed(lambda: tool.ainvoke({"text": "x"})) for _ in range(calls)]  # type: ignore[attr-defined]


async def held_in_caller_loop(calls: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[SERVER], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        [tool] = await load_mcp_tools(session)
        return await samples(tool, calls)


async def ours(calls: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "mcp_servers.json"
        block = {"command": sys.executable, "args": [SERVER]}
        config.write_text(json.dumps({"mcpServers": {"bench": block}}))
        tool = {t.name: t for t in (await load_mcp(config=config)).tools}["bench-echo"]
        try:
            return await samples(tool, calls)
        finally:
            await close_mcp()


async def session_per_call(calls: int) -> list[float]:
    block = {"command": sys.executable, "args": [SERVER], "transport": "stdio", "env": dict(os.environ)}
    client = MultiServerMCPClient({"bench": block})  # type: ignore[dict-item]
    [tool] = await client.get_tools()
    return await samples(tool, calls)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    opts = parser.parse_args()
    base = median_ms(await held_in_caller_loop(opts.calls))
    hub = median_ms(await ours(opts.calls))
    fresh = median_ms(await session_per_call(max(3, opts.calls // 20)))
    print(f"median per call over stdio ({opts.calls} calls; session per call: {max(3, opts.calls // 20)})")
    print(f"  adapters, session held in the caller's loop (baseline): {base:8.2f} ms")
    print(f"  ours, session on the sessions' thread (adapters' tools): {hub:8.2f} ms  {hub / base:.2f}x")
    print(f"  adapters' MultiServerMCPClient, a session per call: {fresh:8.2f} ms  {fresh / base:.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
