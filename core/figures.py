"""The figures of a text, and whether the sources a turn had hold them (G3).

A figure is a number a person reads as a fact: ``720``, ``2,160``, ``3.5``. Dates and times of day in an
answer are the clock's, not figures; in a source they are read too, since "2026-12-04" holds the year an
answer may state. Small counts (up to ``SMALL``) pass: sentences use them without stating anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from .conversation import message_text, turn_start
from .plan import Plan, assemble
from .prompts import (
    ALREADY_RUN,
    ASK_AGAIN_FIGURES,
    ASK_ANSWER,
    ASK_NEXT_STEP,
    CATALOG_INSTRUCTIONS,
    CONTEXT_DELIMITER,
    DOCUMENT_HEADER,
    HELD,
    LOOP_WRITE,
    NAMED_UNUSED,
    NOT_GIVEN_RUN,
    PASSAGE_GIVEN,
    REMINDER,
    REPEATED,
    SLOT,
    STRAY_WRITE,
    UNSOURCED_CALCULATION,
    WRITE_AGAIN,
)

#: Dates and times of day, whose parts are the clock's, not figures: "2026-12-04", "14:05", "December 4".
CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[+-]\d{2}:?\d{2}|Z)?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?"
    r"|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r"\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?"
)
#: A number as written in prose: ``720``, ``2,160``, ``3.5``, ``-4``; not a part of a word or an identifier.
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w])")
#: Clauses shorter than this many words are left out of ``PROMPT_ASKS``: "answer the question" is a person's
#: words too.
ASK_WORDS = 5


def _clauses(*texts: str) -> list[str]:
    """The clauses of the loop's own asks, each as a pattern that reads any run of spaces as one."""
    found = []
    for text in texts:
        for clause in re.split(r"\{[^{}]*\}|[.;:()\n]", text):
            words = re.findall(r"\S+", clause.strip().lstrip(","))
            if len(words) >= ASK_WORDS:
                found.append(r"\s+".join(re.escape(w) for w in words))
    return list(dict.fromkeys(found))


#: What the loop says to steer the model (the catalog's rules, the asks after results, what a call that did
#: not run is told), clause by clause. A person must never read it: with the next-step ask in its prompt,
#: the 1.5B saved a note of the search's title followed by "The question also names save_note, which this
#: turn has not used yet. Check every part of the question. ..." (bench/chains.py ``alert-pause-note``).
PROMPT_ASKS = re.compile(
    "|".join(
        _clauses(
            CATALOG_INSTRUCTIONS, REMINDER, ASK_NEXT_STEP, NAMED_UNUSED, ASK_ANSWER, SLOT, HELD, ALREADY_RUN,
            REPEATED, WRITE_AGAIN, ASK_AGAIN_FIGURES, UNSOURCED_CALCULATION,
        )
    ),
    re.IGNORECASE,
)  # fmt: skip
#: What only the loop writes into a model's prompt, which a person's own text never holds: a clause of its
#: asks (``PROMPT_ASKS``), a search passage's label (``SEARCH_HIT``: with history the 1.5B copied "[2] faq.md
#: (similarity 0.55)" into an answer, and once listed "1. troubleshooting.txt (similarity 0.60)" with the
#: digest's ``PASSAGE_GIVEN`` after it), a document text's delimiter or header (``CONTEXT_DELIMITER``,
#: ``DOCUMENT_HEADER``). A write holding it is sent back (``approve.check_written_figures``).
LOOP_TEXT = re.compile(
    r"\(similarity [\d.]+\)|"
    + re.escape(PASSAGE_GIVEN)
    + "|"
    + CONTEXT_DELIMITER.pattern
    + "|"
    + DOCUMENT_HEADER.pattern
    + "|(?i:"
    + PROMPT_ASKS.pattern
    + ")"
)
#: What only the machinery writes in an answer: a call's JSON (as ``save_note({"text": ...})`` too: with
#: history the 1.5B answered with one), a code fence, a line of the results' digest, and ``LOOP_TEXT``. A
#: write may hold JSON or code a person asked for; an answer in plain words does not.
MACHINERY = re.compile(
    r'```|\{\s*"(?:name|arguments|args)"\s*:|^\s*- [\w-]+\(.*\) (?:returned|was not run)|\b[\w-]+\(\s*\{\s*"|'
    + LOOP_TEXT.pattern,
    re.M,
)
#: Figures a source may write as a word ("fifteen percent"); the value of each word alone.
WORD_VALUES = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "sixty": 60.0, "seventy": 70.0, "eighty": 80.0,
     "ninety": 90.0, "hundred": 100.0, "thousand": 1000.0}  # fmt: skip
#: A figure written as a word ("two", "a hundred"): an answer states its result so too.
NUMBER_WORD = re.compile(rf"\b(?:{'|'.join([*WORD_VALUES, 'million', 'billion'])})\b", re.IGNORECASE)
#: Counts a sentence uses without stating a figure ("2 steps", "the 3 results", list markers).
SMALL = 10


def figures(text: str, *, clock: bool = True) -> set[float]:
    """The numbers written in ``text``; thousands separators read through.

    Args:
        text: What is read.
        clock: Read the numbers of dates and times too. An answer's are not figures ("December 4" states no
            4 of anything), but a source's are: "2026-12-04" holds the year an answer may state.
    """
    found = set()
    for raw in NUMBER.findall(text if clock else CLOCK.sub(" ", text)):
        try:
            found.add(float(raw.replace(",", "").rstrip(".")))
        except ValueError:
            continue
    return found


def unsupported(answer: str, sources: str) -> list[float]:
    """The figures of ``answer`` that ``sources`` does not hold (small counts aside), in order of value."""
    given = figures(sources)
    stated = figures(answer, clock=False)
    return sorted(n for n in stated if abs(n) > SMALL and not any(abs(n - g) < 1e-9 for g in given))


#: Factors a calculation brings itself, which no source need hold: 12 months, 24 hours, 60 minutes, 52 weeks,
#: 365 days, 1024 (the small ones, 7 days, are under ``SMALL``). Not 1000: the 1.5B priced four seats with
#: ``4 * 1000 * 12``, a round figure made up, more often than anything converted thousands.
UNIT_FACTORS = frozenset({12.0, 24.0, 28.0, 30.0, 31.0, 52.0, 60.0, 365.0, 366.0, 1024.0, 1440.0, 3600.0})
#: Halves and quarters, which a calculation writes for "half" or "a quarter" as a person says them.
PARTS = frozenset({0.25, 0.5, 0.75, 1.5})


def _held(value: float, given: set[float]) -> bool:
    return any(abs(value - g) < 1e-6 * max(1.0, abs(g)) for g in given)


#: ``100`` as a percent's: divided by ("15 / 100 * 640"), or multiplying a quotient ("(7 - 6) / 6 * 100").
#: Not ``(3 * 100) / 12``: the 1.5B wrote that with a price of 100 it made up.
PERCENT_100 = re.compile(r"/\s*100(?![\d.])|/[^*+\-]*\*\s*100(?![\d.])")


def _own(n: float, percent: bool) -> bool:
    """Whether a calculation brings ``n`` itself: a small whole count, a part, a unit, a percent's 100."""
    return (abs(n) <= SMALL and n == int(n)) or n in PARTS or n in UNIT_FACTORS or (n == 100 and percent)


def unsourced_operands(expression: str, sources: str) -> list[float]:
    """The figures a calculation starts from that no source of the turn holds, in order of value.

    With no document to read, the 1.5B asked what three installations cost wrote ``calculate("3 * 100")``
    with a price it made up, and answered "300 dollars": a result every check then reads as a source. A
    figure is given when a source holds it, as a figure or a word, or as a percent of it (``0.15``, ``1.15``
    and ``0.85`` for 15 %); a small whole count, a half or a quarter, a unit's factor and a percent's ``100``
    (``PERCENT_100``) are the calculation's own.
    """
    words = {WORD_VALUES[w.lower()] for w in NUMBER_WORD.findall(sources) if w.lower() in WORD_VALUES}
    given = figures(sources) | words
    percent_100 = bool(PERCENT_100.search(expression))
    found = []
    for n in sorted(figures(expression, clock=False)):
        percent = {n * 100, (n - 1) * 100, (1 - n) * 100} if abs(n) < 2 else set()
        if not (_own(n, percent_100) or _held(n, given) or any(_held(p, given) for p in percent)):
            found.append(n)
    return found


def refused_calculations(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The turn's ``calculate`` calls ``approve`` refused for a figure no source holds (``NOT_GIVEN_RUN``)."""
    turn = messages[turn_start(messages) :]
    return [m for m in turn if isinstance(m, ToolMessage) and message_text(m).startswith(NOT_GIVEN_RUN)]


def problems(answer: str, sources: str) -> tuple[list[float], bool]:
    """What keeps an answer from the person: figures no source holds, and whether it shows the machinery."""
    return unsupported(answer, sources), bool(MACHINERY.search(answer))


def shown(value: float) -> str:
    """A figure as a person writes it: 720, not 720.0."""
    return f"{value:g}" if value != int(value) else str(int(value))


def turn_sources(plan: Plan, messages: Sequence[BaseMessage]) -> tuple[list[ToolMessage], str]:
    """The running turn's tool results that ran, and the text a figure may come from.

    That text is those results in full and the prompt the model read (the system prompt with the date, the
    history, the documents, the question), without G3's own refusals in place of a result: a call sent back
    names the very figure no source holds ("Not run (figures): ... 60"). A tool's own error stays: it may
    hold what the person is to be told.

    Both G3 checks read the same sources, so an answer and a write's card are held to one standard.
    """
    results = [
        m for m in messages[turn_start(messages) :] if isinstance(m, ToolMessage) and m.status != "error"
    ]
    refusals = (NOT_GIVEN_RUN, STRAY_WRITE, LOOP_WRITE)
    read = [
        m
        for m in assemble(plan, messages)
        if not (isinstance(m, ToolMessage) and message_text(m).startswith(refusals))
    ]
    text = [message_text(m) for m in [*read, *results]]
    return results, "\n".join(text)
