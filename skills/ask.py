"""The built-in ``ask_person``: the model asks the person a question (AnythingLLM's request-user-input).

The tool is only the model's way to ask: ``approve`` answers its calls by pausing the turn on a question
interrupt (``core.question``), never by running this function, and the person's answer is the call's
result. The function answers only a call that reached it some other way, saying nothing was asked.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool

from ..core.question import ASK_TOOL

__all__ = ["ask_person_tool"]


async def ask_person(question: str, choices: list[str] | None = None) -> str:
    """Ask the person one short question when the request cannot be done without something only they know.

    Give choices when the answer is one of a few options. Never ask what the documents or the other tools
    can answer.
    """
    return "Not asked: a question reaches the person only through the turn's approval step."


def ask_person_tool() -> BaseTool:
    """The tool as the model is offered it."""
    return StructuredTool.from_function(coroutine=ask_person, name=ASK_TOOL)
