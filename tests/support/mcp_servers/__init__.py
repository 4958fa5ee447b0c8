"""Small real MCP servers (FastMCP) that the integration tests start over stdio, SSE and streamable HTTP."""
