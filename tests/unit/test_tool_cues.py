"""The words by which a message asks for a tool (as C0 and ``named_unused`` read them).

None of these requests is from the bench: each tool is asked for, and not, in words of other subjects.
"""

from __future__ import annotations

import pytest
from langchain_core.tools import StructuredTool

from workspace_agent.providers.prompted.cues import ASKED_BY, EXAMPLES, asked_for, tool_texts, unit_given


def tool(name: str, description: str = "A tool.") -> StructuredTool:
    return StructuredTool.from_function(lambda: "", name=name, description=description)


ASKED = [
    ("save_note", "Please remember that the plumber comes on Tuesday."),
    ("save_note", "Jot down the door code for me."),
    ("save_to_workspace", "Store this recipe as a new document."),
    ("fetch_url", "What does https://example.net/changelog say about version 3?"),
    ("calculate", "How many seconds are in a week?"),
    ("calculate", "What do the tickets for the whole family cost altogether?"),
    ("calculate", "The warranty runs two years. How many months is that?"),
    ("calculate", "How old is a house built in 1932?"),  # one number, a quantity asked (figure_alone)
    ("calculate", "Which year will it be 40 years from now?"),
    ("calculate", "How many guests come together if 12 say yes?"),
    ("calculate", "We are 6 friends sharing the cabin. What does each of us pay?"),  # a count (figure_counts)
    ("calculate", "In 12 weeks, which month will it be?"),
    ("current_datetime", "Is it already the weekend, what's the date?"),
    ("summarize_document", "Give me a summary of the lease."),
    ("sql_query", "How many invoices are in the billing database?"),
    ("web_search", "Look online for the opening hours of the museum."),
]
NOT_ASKED = [
    ("save_note", "What is the boiling point of water?"),
    ("save_to_workspace", "Which documents mention the warranty?"),
    ("fetch_url", "Tell me about the history of the internet."),
    ("calculate", "Who painted the Mona Lisa?"),
    ("calculate", "How long is the warranty on the dishwasher?"),  # a fact (arithmetic_asked)
    ("calculate", "How many rooms does the flat on Elm Street have?"),
    ("calculate", "Who directed the film 2001: A Space Odyssey?"),  # a number, nothing to compute
    ("calculate", "Which bands played together at the festival?"),
    ("calculate", "Which films won prizes at the 1969 festival in Cannes?"),  # a year counts nothing
    ("calculate", "What is the difference between a lease and a rental agreement?"),
    ("summarize_document", "Which documents are in this workspace?"),
]


@pytest.mark.parametrize(("name", "message"), ASKED)
def test_a_request_in_words_asks_for_the_tool(name: str, message: str) -> None:
    assert asked_for(tool(name), message, builtin=True)


@pytest.mark.parametrize(("name", "message"), NOT_ASKED)
def test_a_message_that_does_not_ask_does_not_offer_the_tool(name: str, message: str) -> None:
    assert not asked_for(tool(name), message, builtin=True)


def test_a_tool_of_its_own_is_asked_for_by_what_its_name_acts_on() -> None:
    ticket = tool("helpdesk-open_ticket")
    assert asked_for(ticket, "Open a ticket about the broken printer", builtin=False)
    assert asked_for(ticket, "Any open tickets?", builtin=False), "a plural names it too"
    assert not asked_for(ticket, "Open the pod bay doors", builtin=False)
    assert not asked_for(tool("do"), "do it", builtin=False), (
        "a name's word under three letters names nothing"
    )


def test_every_cue_is_for_a_tool_with_example_requests_or_a_description() -> None:
    for name in ASKED_BY:
        texts = tool_texts(tool(name, "Reads something."))
        assert texts[0].startswith(name.replace("_", " ")) and len(texts) == 1 + len(EXAMPLES.get(name, ()))


GIVEN = ["The parcel locker keeps a package for 72 hours before it goes back to the sender."]


@pytest.mark.parametrize(
    ("message", "unit"),
    [
        ("How many hours does the locker keep a package?", "hours"),  # the passage says it in hours
        ("How many days does the locker keep a package?", None),  # 72 hours, asked in days: a conversion
        ("How many hours do 3 packages wait in all?", None),  # a number to compute with
        ("How many times has the package been moved?", None),  # not a unit
    ],
)
def test_a_figure_asked_in_the_unit_the_passages_give_is_a_lookup(message: str, unit: str | None) -> None:
    assert asked_for(tool("calculate"), message, builtin=True), "calculate's cue still reads the unit"
    assert unit_given(message, GIVEN) == unit


def test_without_passages_a_unit_asked_stays_a_cue_for_calculate() -> None:
    assert unit_given("How many hours does the locker keep a package?", []) is None
    assert unit_given("How many minutes does it take?", ["a 90-minute walk"]) == "minutes"
