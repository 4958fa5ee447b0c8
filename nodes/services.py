"""The tools a turn may use: built-ins, the program's own tools, and MCP tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from ..checkpoints.chatlog import Records
from ..checkpoints.chunks import DocumentStore
from ..checkpoints.members import require
from ..checkpoints.memories import PostgresMemories
from ..core.context import Context, MemoryContext, document_scope
from ..core.question import ASK_TOOL
from ..core.settings import ModelSettings, model_settings
from ..providers.chat.models import chat_model
from ..skills.ask import ask_person_tool
from ..skills.builtin import builtin_tools
from ..skills.document_tools import DOCUMENT_WRITERS
from ..skills.mcp import load_mcp
from ..skills.sql import sql_tools
from ..skills.summaries import summary_tools
from ..skills.web import web_tools
from ..skills.web_search import web_search_tools


@dataclass
class Toolset:
    """The tools of one turn by name, and what could not be loaded (reported, never fatal)."""

    tools: dict[str, BaseTool]
    problems: list[str] = field(default_factory=list)
    #: Tools there are but this workspace (``tools``) or this run (``only_tools``, ``without_tools``) did not
    #: choose.
    unchosen: set[str] = field(default_factory=set)


def chosen(context: Context, name: str) -> bool:
    """Whether the tool is offered: in ``tools`` and ``only_tools`` (unset: all), not in ``without_tools``.

    ``ask_person`` also needs ``clarifying_questions`` and no ``job``: nobody answers a scheduled run.
    """
    if name == ASK_TOOL and (not context.clarifying_questions or context.job is not None):
        return False
    for allowed in (context.tools, context.only_tools):
        if allowed is not None and not any(fnmatchcase(name, p) for p in allowed):
            return False
    return not any(fnmatchcase(name, p) for p in context.without_tools)


@dataclass
class Services:
    """What the nodes use besides state and context: records, documents, the program's own tools and model.

    ``settings`` are the deployment's model settings, resolved once for the graph (``build_graph``): where
    the chat model is and what it can do. Built without them, the environment's are read once, here.
    """

    records: Records
    extra_tools: list[BaseTool] = field(default_factory=list)
    model: BaseChatModel | None = None
    documents: DocumentStore = field(default_factory=DocumentStore)
    settings: ModelSettings = field(default_factory=model_settings)
    _builtins: dict[tuple[str, str], list[BaseTool]] = field(default_factory=dict, repr=False)
    #: Embeddings of the tools' texts by (vector space, text), for the turn's tool choice (C0).
    tool_vectors: dict[tuple[str, str], list[float]] = field(default_factory=dict, repr=False)
    _bound: dict[tuple[int, ...], Any] = field(default_factory=dict, repr=False)

    def bind_tools(self, model: BaseChatModel, tools: list[BaseTool]) -> Any:
        """``model`` with ``tools`` bound, converted once: the schemas are the same every call of a turn."""
        key = (id(model), *(id(t) for t in tools))
        if key not in self._bound:
            if len(self._bound) > 256:
                self._bound.clear()
            self._bound[key] = (model, tools, model.bind_tools(tools))  # holding both keeps the ids unique
        return self._bound[key][2]

    def builtins(self, context: Context) -> list[BaseTool]:
        """The built-in tools of a workspace and user, built once (deriving tool schemas is slow)."""
        key = (context.workspace, context.user_id)
        if key not in self._builtins:
            if len(self._builtins) > 1024:
                self._builtins.clear()
            tools = builtin_tools(context.workspace, context.user_id, self.records, self.documents)
            scope = document_scope(context.user_id, context.workspace)
            summaries = summary_tools(scope, self.documents, self.chat_model)
            # the deployment's outward tools: web_search and sql_* only when it configured them; all ask
            outward = [*web_tools(), *web_search_tools(), *sql_tools()]
            self._builtins[key] = [*tools, *summaries, ask_person_tool(), *outward]
        return self._builtins[key]

    def chat_model(self, context: Context) -> BaseChatModel:
        """The program's own chat model if it brought one, else ``context.model`` at the settings' URL."""
        return self.model if self.model is not None else chat_model(context.model, self.settings)

    def call_grammar(self) -> bool:
        """Whether prompted calls carry a llama.cpp grammar: for the configured endpoint, if it takes one.

        A program's own model is not the configured endpoint, so nothing is assumed of it.
        """
        return self.model is None and self.settings.call_grammar

    async def toolset(self, context: Context) -> Toolset:
        """Every tool offered to the model in this workspace; a name clash keeps the first one.

        MCP tools come last, so a server can never shadow a built-in or the program's own tool. Loading them
        is cheap after the first call (sessions are held, the servers file is re-read only when it changes),
        which matters because several nodes of every turn ask.
        """
        mcp = await load_mcp(context.mcp_servers, call_timeout=context.tool_timeout)
        tools: dict[str, BaseTool] = {}
        problems: list[str] = list(mcp.problems)
        for tool in [
            *self.builtins(context),
            *self.extra_tools,
            *mcp.tools,
        ]:
            if tool.name in tools:
                problems.append(f"tool name {tool.name!r} is offered twice; the first one is kept")
                continue
            tools[tool.name] = tool
        unchosen = {name for name in tools if not chosen(context, name)}
        if not (await require(context.user_id, context.workspace)).allows("write"):
            unchosen |= DOCUMENT_WRITERS & set(tools)  # a member reads a shared workspace's documents only
        for pattern in context.tools or []:
            if not any(fnmatchcase(name, pattern) for name in tools):
                problems.append(f"the workspace's tools name {pattern!r}, which matches no tool")
        return Toolset({n: t for n, t in tools.items() if n not in unchosen}, problems, unchosen)


# The memory graph's dependencies.


class NoModel(RuntimeError):
    """No model is configured for the memory job."""


@dataclass
class MemoryServices:
    """What the memory nodes use besides state and context: the memories table and, optionally, a model."""

    memories: PostgresMemories
    model: BaseChatModel | None = None
    #: The deployment's model settings, resolved once when the graph was built.
    settings: ModelSettings = field(default_factory=model_settings)

    def chat_model(self, ctx: MemoryContext) -> BaseChatModel:
        """The program's model if it brought one, else ``ctx.model`` at the OpenAI-compatible endpoint.

        Raises:
            NoModel: Neither the program nor the deployment nor the run names a model.
        """
        if self.model is not None:
            return self.model
        if not ctx.model:
            raise NoModel("no model configured: set MEMORY_MODEL or CHAT_MODEL, or the run's model")
        return chat_model(
            ctx.model, self.settings
        )  # no endpoint set: the embedded local model, as for the agent
