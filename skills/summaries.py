"""The document reading tools: ``list_documents`` and ``summarize_document`` (AnythingLLM's summarizer).

Both only read, so both are auto-approved by default. A document that fits the model's share of the window is
given to the model whole; a longer one is summarized section by section, each section with the key points
carried forward from the ones before (AnythingLLM's scheme: sections of about 45 % of the window, key points
of about 5 %). After ``SECTIONS_BEFORE_ASKING`` sections the person is asked, through the same approval
interrupt as any tool call, whether to go on; a reject, or any answer that is not an approve, returns the
summary so far. AnythingLLM asks only after three chunks too, but not through anything a client can answer.

On resume LangGraph runs the node again from its start, so the sections already summarized are kept in a
small in-process cache keyed by the document's content: the second pass reads them back instead of asking
the model again.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.types import interrupt

from ..checkpoints.chunks import Document, DocumentStore
from ..core.context import Context
from ..core.prompts import SECTION_PROMPT, WHOLE_DOCUMENT
from ..providers.tokens import count, encoding
from .document_tools import live_settings

#: Share of the window a document may take whole, and the size of one section of a longer one.
SECTION_SHARE = 0.45
#: Share of the window the running key points may take.
KEY_POINTS_SHARE = 0.05
SECTIONS_BEFORE_ASKING = 3
DESCRIPTION_CHARS = 120
_CACHE_LIMIT = 256
_sections: dict[str, str] = {}


def _description(opening: str) -> str:
    """A line that says what a document is about: its first line of text, markup stripped, cut short."""
    for line in opening.splitlines():
        line = line.strip().lstrip("#>*-= ").strip()
        if line and not line.startswith("<!--"):
            return line if len(line) <= DESCRIPTION_CHARS else line[: DESCRIPTION_CHARS - 1] + "…"
    return ""


def _named(documents: list[Document], name: str) -> list[Document]:
    """Documents a model may mean by ``name``: id, title, file name or source.

    Failing those, the title or file name case-blind and without its suffix ("pricing" for pricing.md), as a
    person would say it; then a document whose name is one word of ``name`` ("the pricing document").
    """
    name = name.strip()
    exact = [d for d in documents if name in (str(d.id), d.title, d.source, PurePath(d.source).name)]
    if exact:
        return exact
    loose = name.casefold()
    named = [d for d in documents if loose in {n.casefold() for n in (d.title, *_stems(d))}]
    if named:
        return named
    words = set(re.findall(r"[^\W_]+(?:[.-][^\W_]+)*", loose))  # "the pricing document", "pricing_doc"
    return [d for d in documents if words & {n.casefold() for n in (d.title, *_stems(d))}]


def _stems(doc: Document) -> tuple[str, str]:
    return PurePath(doc.title).stem, PurePath(doc.source).stem


def _sections_of(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` tokens each (the last may be shorter)."""
    tokens = encoding().encode(text)
    return [encoding().decode(tokens[i : i + size]) for i in range(0, len(tokens), size)]


def _continue_request(call_id: str, name: str, done: int, left: int, error: str | None) -> dict[str, Any]:
    """The approval interrupt's own shape, asking one thing: go on with the remaining sections."""
    request: dict[str, Any] = {
        "type": "tool_approval",
        "action_requests": [
            {
                "tool_call_id": call_id,
                "name": "summarize_document",
                "args": {"name": name, "sections_done": done, "sections_left": left},
                "description": f"{left} section(s) left: continue?",
            }
        ],
        "review_configs": [{"action_name": "summarize_document", "allowed_decisions": ["approve", "reject"]}],
    }
    if error:
        request["error"] = error
    return request


def _go_on(value: Any) -> bool | str:
    """The person's answer: ``True`` to go on, ``False`` to stop, or what is wrong with the resume value."""
    decisions = value.get("decisions") if isinstance(value, dict) else None
    if not isinstance(decisions, list) or len(decisions) != 1 or not isinstance(decisions[0], dict):
        return 'resume with {"decisions": [{"type": "approve"}]} to go on, or "reject" to stop'
    kind = decisions[0].get("type")
    if kind not in ("approve", "reject"):
        return f"decision 0: type must be approve or reject, got {kind!r}"
    return kind == "approve"


def ask_to_continue(call_id: str, name: str, done: int, left: int) -> bool:
    """Ask the person whether to summarize the remaining sections; a bad answer asks again with its error."""
    error = None
    while True:
        answer = _go_on(interrupt(_continue_request(call_id, name, done, left, error)))
        if isinstance(answer, bool):
            return answer
        error = answer


async def _key_points(model: BaseChatModel, doc: Document, index: int, section: str, earlier: str) -> str:
    """The running key points after one more section, from the cache when this pass already made them."""
    window = live_settings().window
    key = hashlib.sha256(f"{doc.content_hash}:{doc.id}:{index}:{earlier}:{window}".encode()).hexdigest()
    if key not in _sections:
        words = max(int(window * KEY_POINTS_SHARE * 0.75), 40)
        prompt = [
            SystemMessage(SECTION_PROMPT.format(words=words)),
            HumanMessage(
                f"Document: {doc.title}\n\nKey points so far:\n{earlier or '(none yet)'}\n\n"
                f"Section {index + 1}:\n{section}"
            ),
        ]
        timeout = live_settings().tool_timeout
        reply = await asyncio.wait_for(model.with_config(tags=["nostream"]).ainvoke(prompt), timeout)
        if len(_sections) >= _CACHE_LIMIT:
            _sections.clear()
        _sections[key] = str(reply.content).strip()
    return _sections[key]


def summary_tools(
    workspace: str, store: DocumentStore, model_for: Callable[[Context], BaseChatModel]
) -> list[BaseTool]:
    """``list_documents`` and ``summarize_document`` for one user's workspace (its ``document_scope``).

    Args:
        workspace: The workspace's key in the documents tables, never a name the model gives.
        store: The graph's own document store.
        model_for: The turn's chat model for its settings (``Services.chat_model``).
    """

    async def list_documents() -> str:
        """List the documents of this workspace: id, title, file name and size in tokens."""
        documents = await store.list_documents(workspace)
        if not documents:
            return "This workspace has no documents."
        openings = await store.openings(workspace, DESCRIPTION_CHARS * 4)
        lines = [
            f"- id {d.id}: {d.title} ({d.tokens} tokens): {_description(openings.get(d.id, ''))}"
            for d in documents
        ]
        return f"{len(documents)} document(s):\n" + "\n".join(lines)

    async def summarize_document(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Read or summarize one document of this workspace, named by its title, file name or id."""
        documents = await store.list_documents(workspace)
        found = _named(documents, name)
        if len(found) != 1:
            names = ", ".join(f"{d.title!r} (id {d.id})" for d in documents) or "none"
            why = "No document is named" if not found else "Several documents are named"
            return f"{why} {name!r}. This workspace's documents: {names}."
        [doc] = await store.documents_with_content(workspace, [found[0].id])
        text = doc.content or ""
        ctx = live_settings()
        size = max(int(ctx.window * SECTION_SHARE), 200)
        if count(text) <= size:
            return WHOLE_DOCUMENT.format(title=doc.title, text=text)
        sections = _sections_of(text, size)
        model = model_for(ctx)
        points = ""
        for index, section in enumerate(sections):
            if index == SECTIONS_BEFORE_ASKING and not ask_to_continue(
                tool_call_id, doc.title, index, len(sections) - index
            ):
                return (
                    f"Key points of {doc.title}, sections 1-{index} of {len(sections)} (the person chose to "
                    f"stop there):\n{points}"
                )
            points = await _key_points(model, doc, index, section, points)
        return f"Key points of {doc.title} (all {len(sections)} sections):\n{points}"

    return [
        StructuredTool.from_function(coroutine=list_documents, name="list_documents"),
        StructuredTool.from_function(
            coroutine=summarize_document, name="summarize_document", metadata={"paced": True}
        ),
    ]
