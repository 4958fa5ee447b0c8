"""Reading a prompted list's close from the model's token probabilities (``providers.prompted.more_calls``).

The token lists are shaped as the embedded model's llama.cpp server returns them: a call's last brace and
the list's close are often one token (``"}}]``), and the alternatives are other merged tokens.
"""

from __future__ import annotations

import pytest

from tests.support.helpers import token
from workspace_agent.providers.prompted.more_calls import closes, more_probability, reopened

CALL = '{"name": "get_weather", "arguments": {"location": "Boston, MA"}}'


def tokens_of(*pieces: str) -> list[dict]:
    return [token(p, (p, 1.0)) for p in pieces]


def test_closes_notes_what_follows_each_call_of_the_top_level_list_only():
    nested = '{"name": "x", "arguments": {"v": [1, {"y": "]},"}]}}'  # brackets in a string and in a value
    text = f"```json\n[\n  {CALL},\n  {nested}\n]\n```"
    notes = closes(text)
    assert [c for c, _ in notes] == [",", "]"]
    assert text[notes[0][1]] == "," and text[notes[1][1]] == "]"


def test_a_bare_call_a_second_list_or_free_text_closes_no_list():
    assert closes(CALL) == []
    assert closes("It is sunny [citation] {not json}, I think.") == []
    assert [c for c, _ in closes(f"[{CALL}] and then [{CALL}, {CALL}]")] == ["]"], "the first list only"


def test_the_chance_of_another_call_is_read_at_the_token_that_closed_the_list():
    head = tokens_of("[", '{"', "name", '": "', "get_weather", '", "', "arguments", '": {"', "location")
    head += tokens_of('": "', "Boston", ", MA", '"}}')  # the call is closed, the list is not yet
    closing = token("]", ("]", 0.80), (",", 0.15), (",\n", 0.03), ("]\n", 0.02))
    assert more_probability([*head, closing]) == pytest.approx(0.18)


def test_a_merged_closing_token_is_weighed_against_merged_alternatives():
    head = tokens_of("[", '{"', "name", '": "', "f", '", "', "arguments", '": {"', "a", '": 1')
    closing = token("}}]", ("}}]", 0.70), ("}},", 0.20), ("}}", 0.06), ("}},\n", 0.04))
    # "}}" alone decides nothing yet, so it counts for neither side
    assert more_probability([*head, closing]) == pytest.approx(0.24)


def test_a_list_closed_without_a_doubt_and_a_list_never_closed():
    done = [*tokens_of("[", CALL), token("]", ("]", 0.999), ("]\n", 0.001))]
    assert more_probability(done) == 0.0
    assert more_probability(tokens_of("[", CALL, ",", CALL)) is None, "cut off before its close"
    assert more_probability(tokens_of("The weather is fine.")) is None


def test_the_last_close_counts_and_a_reopened_reply_is_read_after_its_head():
    head = f"[{CALL},"
    written = [*tokens_of(" ", CALL), token("]", ("]", 0.6), (",", 0.4))]
    assert more_probability(written, prefix=head) == pytest.approx(0.4)
    both = [*tokens_of("[", CALL), token(",", (",", 0.9), ("]", 0.1)), *tokens_of(CALL, "]")]
    assert more_probability(both) == 0.0, "the first close continued; the last one decides"


def test_reopened_is_the_reply_up_to_its_last_call_and_a_comma():
    text = f"```json\n[\n  {CALL}\n]\n```"
    assert reopened(text) == f"```json\n[\n  {CALL},"
    assert reopened(f"[{CALL}, {CALL}") is None, "a list not closed is not reopened"
    assert reopened("plain answer") is None
