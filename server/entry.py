"""What the servers load from ``langgraph.json``, by file path.

Aegra loads a graph only from a file, and a file loaded by path is no member of the package, so it cannot
use the relative imports every other module uses. This file alone imports the package by its absolute
names and re-exports what the servers ask for; the objects themselves live in their own modules, loaded
once whichever server asks.
"""

from workspace_agent.checkpoints.savers import dev_checkpointer
from workspace_agent.graphs.agent import graph as agent
from workspace_agent.graphs.ingest import graph as ingest
from workspace_agent.graphs.memory import graph as memory
from workspace_agent.server.auth import auth
from workspace_agent.server.http_app import app

__all__ = ["agent", "app", "auth", "dev_checkpointer", "ingest", "memory"]
