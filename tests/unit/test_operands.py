"""Which figures a calculation may start from (G3's check of ``calculate``'s operands), read alone."""

from __future__ import annotations

import pytest

from workspace_agent.core.figures import unsourced_operands

SOURCES = (
    "Today is 2026-12-04. The Team plan costs 12 EUR per month, the Business plan 49 EUR; fifteen seats."
)


@pytest.mark.parametrize(
    "expression",
    [
        "49 * 3",  # a price the documents give, a small count
        "2026 - 1999 + 0",  # the clock's year; 1999 is checked below
        "15 / 100 * 49",  # a figure given as a word, and 100 in a division (a percent)
        "(49 - 12) / 12 * 100",  # a change in percent
        "49 * 0.15",  # the same percent as a fraction
        "49 * 1.15",  # a rise by it
        "49 * 0.85",  # a cut by it
        "12 * 12 * 5",  # twelve months of a monthly price
        "49 * 24 * 365 / 1024",  # units of time and size
    ],
)
def test_figures_a_source_holds_or_a_unit_brings_are_given(expression: str) -> None:
    assert unsourced_operands(expression.replace("1999", "2026"), SOURCES) == []


@pytest.mark.parametrize(
    ("expression", "made_up"),
    [
        ("3 * 100", [100.0]),  # the dev server's finding: a price nobody gave
        ("49 * 0.2", [0.2]),  # a discount of 20 % nobody gave
        ("2026 - 1999", [1999.0]),
        ("14 * 3 + 49", [14.0]),
        ("4 * 1000 * 12", [1000.0]),  # a round price made up, not thousands converted
        ("(3 * 100) / 12", [100.0]),  # a division, but 100 is no percent's here
    ],
)
def test_a_figure_nothing_gave_is_made_up(expression: str, made_up: list[float]) -> None:
    assert unsourced_operands(expression, SOURCES) == made_up
