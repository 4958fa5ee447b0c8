"""Issue 13 item 13: chats left unmarked by a failed batch are finished by the next run, however few.

They had already passed the gates (``min_chats`` among them) when their batch failed, so they must not wait
for ``min_chats`` more chats. The scripted OpenAI-compatible server fails the observer, then works.
"""

from __future__ import annotations

from tests.integration.test_memory import batches, marks, memory_rule, run, seed
from tests.support.helpers import decisions_of

SETTINGS = {"min_chats": 5, "batch_size": 5, "idle_minutes": 0}


async def test_leftovers_of_a_failed_batch_are_finished_by_the_next_run(
    llm, database_url, workspace, monkeypatch
):
    ids = await seed(database_url, workspace, 7)
    failing = True
    monkeypatch.setattr(
        llm,
        "rule",
        memory_rule(lambda text: {"status": 500} if failing and "chat 5 prompt" in text else None),
    )
    out = await run(database_url, workspace, **SETTINGS)
    assert [(r["read"], r["marked"]) for r in batches(out)] == [(5, 5), (2, 0)]
    state = await marks(database_url, workspace)
    assert [i for i in ids if not state[i]] == ids[5:], "two chats left, fewer than min_chats"

    failing = False
    llm.reset()
    after = await run(database_url, workspace, **SETTINGS)
    assert [(r["read"], r["marked"], r["error"]) for r in batches(after)] == [(2, 2, None)]
    assert [i for r in batches(after) for i in r["chat_ids"]] == ids[5:]
    assert all((await marks(database_url, workspace)).values())
    gates = [d["why"] for d in decisions_of(after, "M1") if "read" in d["outcome"]]
    assert len(gates) == 1 and "left unmarked by a failed batch" in gates[0]


async def test_a_group_that_never_passed_the_gates_still_waits_for_min_chats(
    llm, database_url, workspace, monkeypatch
):
    await seed(database_url, workspace, 2)
    monkeypatch.setattr(llm, "rule", memory_rule())
    out = await run(database_url, workspace, **SETTINGS)
    assert batches(out) == [] and llm.requests == []
    assert out["report"][0]["skipped"] == "only 2 unprocessed chat(s); 5 needed"
