"""The observer's and reflector's answers: JSON checked against a schema before anything is stored.

The answers are asked for as plain JSON in the reply text rather than through tool calling or a
``response_format``, so any OpenAI-compatible server works (the local llama.cpp model has no native tool
calling). Code fences and chatter around the object are tolerated; anything that is not the promised shape
is a malformed answer, and its batch stays unmarked for the next run.
"""

from __future__ import annotations

import json
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

MAX_OBSERVATIONS = 3


class MalformedAnswer(ValueError):
    """The model's answer is not the JSON object its prompt asked for."""


class Observation(BaseModel):
    """A candidate fact about the user, with how sure the observer is."""

    content: str = Field(min_length=1, max_length=1000)
    confidence: Literal["high", "medium", "low"]

    @field_validator("confidence", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class Observations(BaseModel):
    """The observer's answer."""

    observations: list[Observation]


class Proposal(BaseModel):
    """One change the reflector proposes; ``skip`` entries are accepted and ignored."""

    action: Literal["create", "update", "skip"]
    scope: Literal["global", "workspace"]
    content: str = Field(default="", max_length=1000)
    update_id: int | None = None

    @field_validator("action", "scope", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _complete(self) -> Proposal:
        if self.action != "skip" and not self.content.strip():
            raise ValueError(f"a {self.action} needs content")
        if self.action == "update" and self.update_id is None:
            raise ValueError("an update needs update_id")
        return self


class Proposals(BaseModel):
    """The reflector's answer."""

    memories: list[Proposal]


Schema = TypeVar("Schema", bound=BaseModel)


def parse_answer(text: str, schema: type[Schema]) -> Schema:
    """The JSON object in ``text`` validated as ``schema``.

    Raises:
        MalformedAnswer: No JSON object, or one of another shape; the message says what was wrong.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise MalformedAnswer(f"no JSON object in the answer: {text[:120]!r}")
    try:
        return schema.model_validate(json.loads(text[start : end + 1]))
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"invalid JSON ({exc.msg} at character {exc.pos}): {text[:120]!r}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors())
        raise MalformedAnswer(f"not the expected shape: {problems}") from exc
