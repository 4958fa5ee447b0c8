"""Issue 35, item 1: hybrid search in PostgreSQL itself, on the embedded database and the real local embedder.

The embedder reads 256 word pieces of a chunk and no more, so in a long chunk a code word past that point
is invisible to dense search. PostgreSQL's full text sees the whole chunk; reciprocal rank fusion brings
that chunk into the top ``top_n`` without pushing out what the embedding ranks well. The workspace's
threshold (cosine similarity) and pins hold in hybrid mode as in dense, and the turn's B8 decision says
which mode ranked the chunks.
"""

from __future__ import annotations

import pytest

from tests.support.helpers import decisions_of, user_message
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.checkpoints.db import connection
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply
from workspace_agent.skills import documents
from workspace_agent.skills.documents import index_document, pin_documents
from workspace_agent.skills.loaders import content_hash

TOPICS = ["canteen", "parking", "lift", "cleaning", "heating", "garden", "reception", "booking", "mail"]
#: A long chunk whose one mention of the ticket comes after the embedder's 256-token window.
MINUTES = (
    "Minutes of the March facilities meeting. "
    + " ".join(
        f"Item {i}: the {topic} schedule is unchanged this month." for i, topic in enumerate(TOPICS * 5)
    )
    + " Among open items, QX-7731 stays with the vendor until their engineer visits."
)
#: Short chunks about tickets in general: close to a question about a ticket's status by embedding.
TICKETS = {
    "portal.md": "The status of every ticket is shown in the helpdesk portal under My tickets.",
    "closing.md": "A ticket is closed when the requester confirms that the fix works.",
    "priority.md": "Ticket priority is set by the helpdesk: urgent tickets are answered within an hour.",
    "reopen.md": "A closed ticket can be reopened within seven days by replying to its email.",
    "waiting.md": "The status of a ticket changes to waiting when the helpdesk needs more information.",
    "escalate.md": "Tickets open for more than five days are escalated to the team lead.",
    "vendor.md": "Some tickets wait on a vendor; their status then shows the vendor's name.",
    "codes.md": "Ticket status codes: new, open, waiting, resolved and closed.",
    "weekly.md": "The helpdesk sends a weekly report of open tickets and their status.",
}
QUESTION = "Is QX-7731 still open?"


@pytest.fixture
async def facilities(database_url: str, workspace: str) -> DocumentStore:
    """The workspace: the long minutes and the ticket notes, each one chunk, embedded by the local model."""
    store = DocumentStore(database_url)
    for name, text in {"minutes.md": MINUTES, **TICKETS}.items():
        digest = content_hash(text.encode())
        await index_document(
            store, workspace, source=name, title=name, text=text, digest=digest, chunk_size=4000
        )
    return store


async def test_a_code_word_dense_search_cannot_see_is_found_by_hybrid(facilities, workspace, database_url):
    assert len(MINUTES) > 2000, "past the embedder's 256-token window"
    dense = await documents.search(facilities, workspace, QUESTION, top_n=4, threshold=0.1, mode="dense")
    hybrid = await documents.search(facilities, workspace, QUESTION, top_n=4, threshold=0.1, mode="hybrid")
    assert "minutes.md" not in [h.title for h in dense.hits], [h.title for h in dense.hits]
    assert "minutes.md" in [h.title for h in hybrid.hits], [h.title for h in hybrid.hits]
    assert len(hybrid.hits) == 4
    assert dense.hits[0].title in [h.title for h in hybrid.hits], "the embedding's best stays"

    bare = await documents.search(facilities, workspace, "QX-7731", top_n=1, threshold=0.0, mode="hybrid")
    assert [h.title for h in bare.hits] == ["minutes.md"], (
        "the code word alone: the chunk that holds it first"
    )

    async with connection(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM chunks"
            " WHERE workspace = %s AND words @@ to_tsquery('english', 'qx-7731')",
            (workspace,),
        )
        row = await cur.fetchone()
    assert row is not None and row["n"] == 1, "the words column is kept in step with each chunk's text"


async def test_threshold_and_pins_hold_in_hybrid_mode(facilities, workspace):
    hybrid = await documents.search(facilities, workspace, QUESTION, top_n=4, threshold=0.25, mode="hybrid")
    assert all(h.similarity >= 0.25 for h in hybrid.hits)
    assert "minutes.md" in [h.title for h in hybrid.dropped], "matched by words, but under the threshold"

    await pin_documents(workspace, ["minutes.md"], True, facilities)
    pinned = await documents.search(facilities, workspace, "QX-7731", top_n=4, threshold=0.0, mode="hybrid")
    assert "minutes.md" not in [h.title for h in pinned.hits + pinned.dropped], (
        "a pinned document is sent whole"
    )


async def test_the_turn_records_which_mode_ranked_its_chunks(facilities, saver, llm, workspace, thread):
    graph = build_graph(checkpointer=saver)
    llm.push(text_reply("It stays with the vendor."))
    context = Context(workspace=workspace, chat_mode="chat", search_mode="hybrid", similarity_threshold=0.1)
    out = await graph.ainvoke(user_message(QUESTION), thread, context=context)
    b8 = decisions_of(out, "B8")[0]
    assert b8["outcome"]["search_mode"] == "hybrid" and "full text" in b8["why"], b8
    assert any(s["title"] == "minutes.md" for s in out["sources"]), out["sources"]
    assert "QX-7731 stays with the vendor" in str(llm.requests[-1]["messages"])
    with pytest.raises(ValueError, match="search_mode"):
        Context(workspace=workspace, search_mode="keyword")  # type: ignore[arg-type]
