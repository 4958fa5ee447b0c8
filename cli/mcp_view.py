"""``workspace-agent mcp``: what the servers file sets up, as the agent would see it.

It starts the servers exactly as a turn would, so a user can tell before chatting why a server's tools are
missing: not auto-started, failed to start (with the server's own error), or tools suppressed.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..skills.mcp import ServerStatus, load_mcp_sync

_STATE_STYLE = {"started": "green", "not auto-started": "yellow", "error": "red"}


def _status(server: ServerStatus) -> str:
    style = _STATE_STYLE[server.state]
    text = f"[{style}]{server.state}[/{style}]"
    if server.error:
        text += f"\n{escape(server.error)}"
    return text


def _tools(server: ServerStatus) -> str:
    lines = [escape(name) for name in server.tools]
    lines += [f"[dim]{escape(name)} (suppressed)[/dim]" for name in server.suppressed]
    if server.state == "started" and not lines:
        return "[dim]no tools[/dim]"
    return "\n".join(lines)


def show_mcp(config_path: str | None, console: Console) -> int:
    """Render the configured MCP servers, their status and their tools; 1 when anything went wrong.

    ``config_path`` ``None`` shows the deployment's file (``MCP_CONFIG``). A missing file is not an error:
    it is how a deployment without MCP servers is configured.
    """
    result = load_mcp_sync(config=config_path)
    if not result.found:
        console.print(f"No MCP servers file at {escape(str(result.path))}: no MCP tools are offered.")
        return 0
    shown = {s.error for s in result.servers if s.error}
    table = Table(title=f"MCP servers ({escape(str(result.path))})", show_lines=True)
    table.add_column("Server", style="bold")
    table.add_column("Transport")
    table.add_column("Status", overflow="fold")
    table.add_column("Tools offered to the model", overflow="fold")
    for server in result.servers:
        table.add_row(escape(server.name), server.transport or "-", _status(server), _tools(server))
    if result.servers:
        console.print(table)
    else:
        console.print(f"{escape(str(result.path))} configures no MCP servers.")
    # problems not already shown in a server's row: a malformed file, clashing tool names
    for problem in (p for p in result.problems if p not in shown):
        console.print(f"[red]problem:[/red] {escape(problem)}")
    return 1 if result.problems else 0
