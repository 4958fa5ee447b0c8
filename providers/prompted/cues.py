"""What tells the turn's tool choice (C0) that a message may need a tool: example requests and cue words.

Each built-in tool has a few example requests, written for this table and about other subjects than the
sample documents, so a message is compared with requests of the same kind rather than with a description
in a tool's own vocabulary ("Evaluate an arithmetic expression" is far, for an embedder, from "what do 3
tickets cost?"). AnythingLLM's reranker embeds example prompts with each tool for the same reason.

``ASKED_BY`` are the words by which a message asks for a tool: for a tool that acts (saves, writes,
fetches), the only way it is offered, because an action is done when it was asked for, never because a
message resembles it. A tool without an entry (an MCP tool, a program's own) is asked for by the word of its
name that says what it acts on (``create_issue``: an issue), as ``named_unused`` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.tools import BaseTool

from .rules import on

#: Longest text of one tool given to the embedder (AnythingLLM cuts at 1000 characters too).
TOOL_TEXT_CHARS = 1000

EXAMPLES: dict[str, tuple[str, ...]] = {
    "calculate": (
        "What is 17 times 23?",
        "How much is 20% of 350?",
        "Add up 120, 45 and 8.",
        "What do 4 tickets at 35 dollars cost in total?",
        "How much is that per year if it is 15 a month?",
        "How many minutes are there in 6 hours?",
        "Convert 3 days into hours.",
    ),
    "current_datetime": (
        "What time is it?",
        "What is today's date?",
        "What day of the week is it?",
        "Which year are we in?",
        "How many days are left until the end of the month?",
    ),
    "search_documents": (
        "What does the handbook say about holidays?",
        "Find the section on installation in my files.",
        "According to the documents, what does the premium tier include?",
        "Look up the warranty period in the uploaded files.",
    ),
    "list_documents": (
        "Which documents are in this workspace?",
        "What files have I uploaded?",
        "Show me the list of documents.",
    ),
    "summarize_document": (
        "Summarize the onboarding guide.",
        "Give me the key points of the report.",
        "What is the contract document about?",
    ),
    "save_note": (
        "Save this as a note.",
        "Write that down in a note for me.",
        "Keep a note of the meeting time.",
    ),
    "save_to_workspace": (
        "Save this text as a new document in the workspace.",
        "Store this summary as a document so I can search it later.",
    ),
    "fetch_url": (
        "Read the page at https://example.org/news.",
        "What does this web page say?",
        "Fetch this link and tell me what it is about.",
    ),
    "web_search": (
        "Search the web for the latest release of the library.",
        "What is in the news about the election?",
    ),
    "sql_query": (
        "How many orders are in the database?",
        "Query the customers table for people in Berlin.",
    ),
}

#: What asks for arithmetic: a number to compute with, an operation or aggregate named, or a figure asked
#: for in a unit, which may be a conversion of the one the documents give.
_OPERATION_WORDS = (
    r"total|altogether|sum|average|percent|per|times|multiply|multiplied|divide|divided|add|subtract|"
    r"minus|plus"
)
_OPERANDS = rf"\d|\b(?:together|{_OPERATION_WORDS})\b"
#: Without ``figure_alone``'s reading, a number anywhere or "together" was a cue by itself. With it, these
#: cue ``calculate`` only beside something that asks for a quantity or a count in time: "Who wrote the novel
#: 1984?" and "what share of the checks has to fail together?" ask for none.
_NAMED_OPERATION = re.compile(
    rf"[-+*/×^%]\s*\d|\d\s*[-+*/×^%x]|\b(?:{_OPERATION_WORDS}|squared?|cubed?|root)\b", re.IGNORECASE
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_QUANTITY_ASKED = re.compile(
    r"\bhow (?:many|much|long|old|often|far)\b|\bcosts?\b|\b(?:ago|since|until|till|from now|later|left|"
    r"remain(?:s|ing)?)\b",
    re.IGNORECASE,
)
#: A number counting things ("3 installations", "in 33 years"): a quantity given to compute with.
_COUNTED = re.compile(r"\b\d+(?:[.,]\d+)*\s+(?:[A-Za-z]+\s+){0,2}?[a-z]+s\b")
_UNITS = r"seconds|minutes|hours|days|weeks|months|years|bytes|kilobytes|megabytes|gigabytes"
_UNIT_ASKED = rf"\b(?:how many|in) ({_UNITS}|times)\b"
_ARITHMETIC = f"{_OPERANDS}|{_UNIT_ASKED}"
#: Any question about a quantity (``arithmetic_asked`` off): a fact the documents hold reads as one too.
_QUANTITY = re.compile(_ARITHMETIC + r"|\bhow (?:many|much|long|old|often|far)\b", re.IGNORECASE)
_SQL = r"\b(?:database|sql|tables?|rows?|columns?|quer(?:y|ies))\b"
ASKED_BY: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        # arithmetic works on figures: a message that gives or asks for a quantity may need it
        "calculate": _ARITHMETIC,
        "current_datetime": r"\b(?:today|now|date|time|weekday|this (?:year|month|week))\b",
        "search_documents": r"\b(?:documents?|files?|search)\b",
        "list_documents": r"\b(?:which|what|list)\b.*\b(?:documents|files)\b",
        "summarize_document": r"\bsummar(?:y|ise|ize)\b|\bkey points\b",
        "save_note": r"\bnotes?\b|\bjot\b|\bremember\b|\bwrite (?:it|this|that) down\b",
        "save_to_workspace": r"\b(?:save|store|add|keep|write)\b.*\b(?:workspace|as an? (?:new )?document)\b",
        "fetch_url": r"https?://|\burl\b|\bweb ?page\b|\bwebsite\b",
        # the deployment's optional tools: read-only, so their examples offer them as well
        "web_search": r"\b(?:web|internet|online|google|news|latest)\b",
        "sql_list_connections": _SQL + r"|\bconnections?\b",
        "sql_list_tables": _SQL,
        "sql_describe_table": _SQL,
        "sql_query": _SQL,
    }.items()
}


def unit_given(message: str, passages: Sequence[str]) -> str | None:
    """The unit a message asks its figure in, when the passages given with it state a figure in that unit.

    A figure asked for in a unit ("how many days ...?") is ``calculate``'s cue because the documents may give
    it in another ("15 minutes", asked in seconds). When the message has nothing else to compute with and
    the passages already state a figure in the unit asked, the question reads as a lookup. Offered
    ``calculate`` for such questions, the 1.5B ran ``calculate('90')`` for "how many days does Lanternfish
    keep check results?" and made up ``30 - 7`` (answering 23) for "within how many days can I ask for a
    refund?". ``None``: the cue stands.
    """
    if re.search(_OPERANDS, message, re.IGNORECASE):
        return None
    given = " ".join(passages)
    for unit in dict.fromkeys(u.lower() for u in re.findall(_UNIT_ASKED, message, re.IGNORECASE)):
        if unit != "times" and re.search(rf"\d[\d,.]*[\s-]*{unit[:-1]}s?\b", given, re.IGNORECASE):
            return unit
    return None


def something_to_compute(message: str) -> bool:
    """Whether the message gives ``calculate`` something to compute (``figure_alone``'s reading).

    An operation named or written, two numbers, a number that counts things ("I run 3 installations", "in 33
    years": the 1.5B, not offered ``calculate`` for these, read its own sum as a stray figure), or a number
    (or "together") in a message that asks for a quantity or a count in time ("how old does someone born in
    1990 turn?", "the year 25 years from now"). A title or a year alone counts nothing ("the novel 1984").
    """
    if _NAMED_OPERATION.search(message) or len(_NUMBER.findall(message)) >= 2:
        return True
    if on("figure_counts") and _COUNTED.search(message):
        return True
    lone = bool(_NUMBER.search(message)) or bool(re.search(r"\btogether\b", message, re.IGNORECASE))
    return lone and bool(_QUANTITY_ASKED.search(message))


def tool_texts(tool: BaseTool) -> list[str]:
    """What a message is compared with for a tool: its name and description, and its example requests."""
    described = f"{tool.name.replace('_', ' ')}: {' '.join(str(tool.description or '').split())}"
    return [described[:TOOL_TEXT_CHARS], *EXAMPLES.get(tool.name, ())]


def _words(text: str) -> set[str]:
    words = set(re.findall(r"[a-z]+", text.lower()))
    return words | {w[:-1] for w in words if w.endswith("s")}


def asked_for(tool: BaseTool, message: str, builtin: bool) -> bool:
    """Whether the message asks for the tool in words: its cue for a built-in, else what its name acts on."""
    if builtin and tool.name == "calculate" and not on("arithmetic_asked"):
        return bool(_QUANTITY.search(message))
    if builtin and tool.name == "calculate" and on("figure_alone"):
        return something_to_compute(message) or bool(re.search(_UNIT_ASKED, message, re.IGNORECASE))
    if builtin and tool.name in ASKED_BY:
        return bool(ASKED_BY[tool.name].search(message))
    last = re.split(r"[^a-z]+", tool.name.lower().rstrip("s"))[-1]
    return len(last) > 2 and last in _words(message)
