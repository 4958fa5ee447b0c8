"""Workspace settings: the per-run context of every graph.

The fields and defaults follow AnythingLLM's workspace settings, so a workspace moved from there behaves the
same. Every field carries a description because LangGraph Studio's assistant panel and the
``/assistants/{id}/schemas`` endpoint show them: clients that send no context per run (Agent Chat UI) get a
workspace's settings from an assistant created with this context.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant for the workspace {workspace}. Today is {date}. "
    "Answer from the context and tools you are given when they are relevant; say so when you do not know."
)
QUERY_REFUSAL = "There is no relevant information in this workspace to answer your query."
READ_ONLY_BUILTINS = ["current_datetime", "calculate", "search_documents"]

# Context windows of well-known model families; anything else falls back to 8192 (DESIGN §2).
KNOWN_WINDOWS = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "qwen2.5-coder": 32_768,
    "llama3": 8_192,
}


def _meta(description: str) -> dict[str, str]:
    return {"description": description}


@dataclass(kw_only=True)
class Context:
    """Settings of one workspace, read by every node of a turn."""

    workspace: str = field(
        default="default",
        metadata=_meta("Workspace slug: documents, chat log and memories are scoped by it."),
    )
    user_id: str = field(
        default="default", metadata=_meta("Whose chat log, approvals and memories these are.")
    )
    chat_mode: Literal["automatic", "chat", "query"] = field(
        default="automatic",
        metadata=_meta(
            "automatic: agent when the model calls tools natively; chat: plain chat unless the message "
            "starts with @agent; query: plain chat that answers only from workspace documents."
        ),
    )
    model: str = field(
        default_factory=lambda: os.environ.get("CHAT_MODEL", "local"),
        metadata=_meta("Model name at the OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY)."),
    )
    native_tool_calling: bool = field(
        default=True,
        metadata=_meta("Whether the model calls tools natively; automatic mode uses the agent only then."),
    )
    system_prompt: str = field(
        default=DEFAULT_SYSTEM_PROMPT,
        metadata=_meta("System prompt; may use {date}, {datetime}, {user_id} and {workspace}."),
    )
    history_limit: int = field(
        default=20,
        metadata=_meta("Earlier exchanges of this thread sent to the model, newest kept; 0 = none."),
    )
    top_n: int = field(default=4, metadata=_meta("Document chunks retrieved per message."))
    similarity_threshold: float = field(
        default=0.25, metadata=_meta("Chunks with a cosine similarity below this are dropped (0..1).")
    )
    context_window: int | None = field(
        default=None, metadata=_meta("Tokens the model accepts; empty = known per model, else 8192.")
    )
    reply_reserve: int = field(default=600, metadata=_meta("Tokens kept free for the reply when trimming."))
    max_tool_calls: int = field(
        default=10, metadata=_meta("Tool executions per turn before the model must answer.")
    )
    tool_timeout: float = field(
        default=60.0, metadata=_meta("Seconds one tool call may run before it is given up.")
    )
    approval_required: list[str] = field(
        default_factory=lambda: ["*"],
        metadata=_meta("Tool-name patterns (fnmatch) that need a person's approval."),
    )
    auto_approved: list[str] = field(
        default_factory=lambda: list(READ_ONLY_BUILTINS),
        metadata=_meta(
            "Tool-name patterns that run without asking; wins over approval_required. MCP: <server>-*."
        ),
    )
    mcp_config: str = field(default="mcp_servers.json", metadata=_meta("Path of the MCP servers file."))
    memories_enabled: bool = field(
        default=True, metadata=_meta("Use and extract long-term memories of the user in this workspace.")
    )
    query_refusal_response: str = field(
        default=QUERY_REFUSAL, metadata=_meta("Answer of query mode when no document context was found.")
    )

    def __post_init__(self) -> None:
        if self.history_limit < 0:
            raise ValueError(f"history_limit must be 0 or more, got {self.history_limit}")
        if self.top_n < 1:
            raise ValueError(f"top_n must be at least 1, got {self.top_n}")
        if not 0.0 <= self.similarity_threshold <= 1.0:
            raise ValueError(f"similarity_threshold must be within 0..1, got {self.similarity_threshold}")
        if self.max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be 0 or more, got {self.max_tool_calls}")
        if self.chat_mode not in ("automatic", "chat", "query"):
            raise ValueError(f"chat_mode must be automatic, chat or query, got {self.chat_mode!r}")

    @property
    def window(self) -> int:
        """Tokens the model accepts, from the setting or the known model families."""
        if self.context_window:
            return self.context_window
        name = self.model.lower()
        for prefix, size in KNOWN_WINDOWS.items():
            if name.startswith(prefix):
                return size
        return 8192

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Context:
        """Build from a plain dict (CLI flags, config files), rejecting unknown names clearly."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}")
        return cls(**values)
