"""The memory job's parsing of model answers and the schedule's intervals: no server, no database."""

from __future__ import annotations

import pytest

from workspace_agent.core.context import ContextError, IngestContext, MemoryContext
from workspace_agent.graphs.schedule import parse_interval
from workspace_agent.nodes.memory.answers import MalformedAnswer, Observations, Proposals, parse_answer


def test_an_answer_wrapped_in_a_code_fence_and_chatter_is_read():
    fact = '{"observations": [{"content": "The user is Ada.", "confidence": "High"}]}'
    text = f"Here you go:\n```json\n{fact}\n```"
    answer = parse_answer(text, Observations)
    assert [(o.content, o.confidence) for o in answer.observations] == [("The user is Ada.", "high")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nothing to say", "no JSON object"),
        ('{"observations": [{"content": "x"', "no JSON object"),
        ('{"observations": [{"content": "x",}]}', "invalid JSON"),
        ('{"observations": [{"content": "", "confidence": "high"}]}', "observations.0.content"),
        ('{"facts": []}', "observations: Field required"),
    ],
)
def test_malformed_observer_answers_are_refused_with_the_reason(text, message):
    with pytest.raises(MalformedAnswer, match=message):
        parse_answer(text, Observations)


def test_reflector_skips_are_accepted_and_updates_need_an_id():
    answer = parse_answer(
        '{"memories": [{"action": "SKIP", "scope": "global"},'
        ' {"action": "update", "scope": "workspace", "update_id": 3, "content": "The user uses Go."}]}',
        Proposals,
    )
    assert [p.action for p in answer.memories] == ["skip", "update"]
    with pytest.raises(MalformedAnswer, match="update_id"):
        parse_answer('{"memories": [{"action": "update", "scope": "global", "content": "x"}]}', Proposals)
    with pytest.raises(MalformedAnswer, match="scope"):
        parse_answer('{"memories": [{"action": "create", "scope": "team", "content": "x"}]}', Proposals)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3h", 10800), ("3hr", 10800), ("30m", 1800), ("1h30m", 5400), ("90", 90), ("2 days", 172800)],
)
def test_intervals(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "3x", "0", "h"])
def test_bad_intervals_are_refused(text):
    with pytest.raises(ValueError):
        parse_interval(text)


def test_the_memory_context_refuses_nonsense_settings():
    assert MemoryContext(model="m").min_chats == 5
    with pytest.raises(ValueError, match="'batch_size' must be at least 1, got 0"):
        MemoryContext(batch_size=0)


BAD_SETTINGS = [
    (MemoryContext, "min_chats", 0, "must be at least 1, got 0"),
    (MemoryContext, "min_chats", True, "must be a whole number"),
    (MemoryContext, "idle_minutes", -1, "must be at least 0, got -1"),
    (MemoryContext, "idle_minutes", "20", "must be a number"),
    (MemoryContext, "max_chars", 99, "must be at least 100"),
    (MemoryContext, "workspace", 7, "must be a string"),
    (MemoryContext, "model", None, "must be a string"),
    (IngestContext, "chunk_size", "1000", "must be a whole number"),
    (IngestContext, "chunk_overlap", 1000, "must be from 0 up to chunk_size - 1 (999)"),
    (IngestContext, "batch_size", False, "must be a whole number"),
    (IngestContext, "workspace", "../other", "must be a slug"),
]


@pytest.mark.parametrize(
    ("schema", "name", "value", "says"),
    BAD_SETTINGS,
    ids=[f"{s.__name__}.{n}={v!r}" for s, n, v, _ in BAD_SETTINGS],
)
def test_the_memory_and_ingest_contexts_name_the_refused_field(schema, name, value, says):
    with pytest.raises(ContextError) as refused:
        schema(**{"model": "m", name: value} if schema is MemoryContext else {name: value})
    assert f"context field '{name}'" in str(refused.value) and says in str(refused.value)
    assert isinstance(refused.value, ValueError), "callers catching ValueError keep working"
