"""The clarifying-question contract: what ``ask_person`` asks a person (the interrupt value) and the answer.

A model that needs something only the person knows calls the built-in ``ask_person(question, choices)``.
The turn pauses on an interrupt of its own kind, ``type: "question"``, so a client never mistakes it for an
approval card (``core.approval``): there is nothing to approve, only something to say. The answer comes back
as ``Command(resume=...)`` and reaches the model as the call's result.

What a client may send as the answer: the text itself, or ``{"answer": "..."}``. With ``choices``, the answer
must be one of them (matched without regard to case or surrounding spaces, and given back as written in
the choices). Anything else is refused by ``checked_answer`` and the same question is asked again, naming
what was wrong, so a bad resume value loses nothing.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from .approval import ResumeError

__all__ = [
    "ASK_TOOL",
    "MAX_ANSWER_CHARS",
    "QuestionRequest",
    "ResumeError",
    "checked_answer",
    "question_request",
]

#: The built-in tool's name, as the model calls it.
ASK_TOOL = "ask_person"
#: The longest answer taken: a person's reply, not a document (a file goes in as an upload).
MAX_ANSWER_CHARS = 4000
#: The most choices a question may offer, and the longest a question or a choice may be.
MAX_CHOICES, MAX_QUESTION_CHARS, MAX_CHOICE_CHARS = 10, 1000, 200


class QuestionRequest(TypedDict):
    """The interrupt value: one question of the model to the person."""

    type: Literal["question"]
    tool_call_id: str
    question: str
    #: The answers offered; ``None``: free text.
    choices: list[str] | None
    #: Why the previous resume value was not taken; the question is the same one, asked again.
    error: NotRequired[str]


def question_request(call_id: str, args: dict[str, object], error: str | None = None) -> QuestionRequest:
    """The interrupt value for one ``ask_person`` call, its arguments bounded to what a person can read."""
    question = str(args.get("question") or "").strip()[:MAX_QUESTION_CHARS]
    given = args.get("choices")
    choices = None
    if isinstance(given, list) and given:
        choices = [str(c).strip()[:MAX_CHOICE_CHARS] for c in given[:MAX_CHOICES] if str(c).strip()] or None
    request: QuestionRequest = {
        "type": "question",
        "tool_call_id": call_id,
        "question": question,
        "choices": choices,
    }
    if error:
        request["error"] = error
    return request


def checked_answer(value: object, request: QuestionRequest) -> str:
    """The person's answer from a resume value, checked against the question.

    Raises:
        ResumeError: Not text, empty, too long, or not one of the choices; the message says which.
    """
    if isinstance(value, dict):
        if set(value) - {"answer"}:
            raise ResumeError('answer a question with {"answer": "..."} (or the text alone), nothing else')
        value = value.get("answer")
    if not isinstance(value, str):
        raise ResumeError(f"the answer must be text, not {type(value).__name__}")
    answer = value.strip()
    if not answer:
        raise ResumeError("the answer is empty")
    if len(answer) > MAX_ANSWER_CHARS:
        raise ResumeError(f"the answer has {len(answer)} characters; the most is {MAX_ANSWER_CHARS}")
    if "\x00" in answer:
        raise ResumeError("the answer contains a NUL character (\\x00)")
    choices = request.get("choices")
    if choices:
        match = next((c for c in choices if c.casefold() == answer.casefold()), None)
        if match is None:
            raise ResumeError(f"the answer must be one of: {', '.join(choices)}")
        return match
    return answer
