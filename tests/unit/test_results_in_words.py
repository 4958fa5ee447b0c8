"""What a person reads when a turn's answer is given in the tools' own words (G3's fallback, ``approve``).

A document search's result is written for the model (its query, numbered passages, similarity scores); the
person reads each passage after its document's name, and each tool by its name in words.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from workspace_agent.checkpoints.chunks import ChunkHit
from workspace_agent.core.conversation import results_in_words
from workspace_agent.skills.document_tools import _format_hits
from workspace_agent.skills.documents import Found


def hit(title: str, text: str, distance: float) -> ChunkHit:
    return ChunkHit(
        id=1, document_id=1, source=f"/docs/{title}", title=title, ordinal=0, text=text, distance=distance
    )


def test_a_document_search_reads_as_its_passages_after_their_documents() -> None:
    found = Found(hits=[hit("lease.md", "The rent is 900 EUR.", 0.3), hit("rules.txt", "No pets.", 0.5)])
    result = _format_hits("rent of the flat", found, 0.25)
    call = AIMessage("", tool_calls=[{"id": "c1", "name": "search_documents", "args": {"query": "rent"}}])
    [line] = results_in_words([call, ToolMessage(result, tool_call_id="c1")])
    assert line == "- search documents: lease.md: The rent is 900 EUR. rules.txt: No pets."
    assert "similarity" not in line and "query" not in line and "[1]" not in line


def test_other_results_keep_their_words() -> None:
    call = AIMessage("", tool_calls=[{"id": "c1", "name": "calculate", "args": {"expression": "6*7"}}])
    assert results_in_words([call, ToolMessage("42", tool_call_id="c1")]) == ["- calculate: 42"]
