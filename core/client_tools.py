"""A client's own tools and reply format for one run: what an OpenAI client sends, checked by type and size.

An OpenAI client (the ``openai`` SDK, LangChain's ``bind_tools`` and ``with_structured_output``) sends its
function schemas, a ``tool_choice`` and a ``response_format`` with every request. They reach the graph as
two run-context fields, ``client_tools`` and ``response_format`` (``Context``), validated here strictly:
they arrive from a stranger over HTTP. Nothing in them can run on the server: a call of a client's function
is handed back to the client (``call_model`` and ``route_after_model``), and a schema is only ever sent to the
model. The limits keep a request from filling the model's window or the server's memory with schemas:
OpenAI's own limit of 128 functions, and sizes in characters of their JSON.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: OpenAI's limits: at most 128 functions, names of letters, digits, ``_`` and ``-`` up to 64.
MAX_CLIENT_TOOLS = 128
FUNCTION_NAME = r"^[A-Za-z0-9_-]{1,64}$"
#: Characters of one function's (or one response format's) JSON schema, and of all functions together.
MAX_SCHEMA_CHARS = 16_384
MAX_TOOLS_CHARS = 65_536
MAX_DESCRIPTION_CHARS = 4_096
#: Nesting of a schema; deeper is no tool's arguments, only a way to make a validator recurse.
MAX_SCHEMA_DEPTH = 32
SCHEMA_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _depth(value: Any, level: int = 0) -> int:
    """How deeply a JSON value nests (stops counting past the limit)."""
    if level > MAX_SCHEMA_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _schema_problem(schema: dict[str, Any], what: str) -> str | None:
    """Why a JSON schema of arguments is malformed, or ``None``: the shape every model endpoint needs.

    Only what decides whether the model can be given it: JSON text of bounded size and depth, an object
    at the top (a function's arguments are named), ``properties`` an object of schemas, ``required`` a list
    of names, and known type names. The rest of JSON Schema is the model endpoint's to read.
    """
    try:
        text = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError):
        return f"{what} must be JSON"
    if len(text) > MAX_SCHEMA_CHARS:
        return f"{what} has {len(text)} characters of JSON; the limit is {MAX_SCHEMA_CHARS}"
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return f"{what} nests deeper than {MAX_SCHEMA_DEPTH} levels"
    kind = schema.get("type", "object")
    if kind != "object":
        return f"{what} must describe an object (type 'object'), got type {kind!r}"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        return f"{what}.properties must be an object of schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"{what}.required must be a list of property names"
    for name, spec in properties.items():
        kinds = spec.get("type")
        listed = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
        if not all(k in SCHEMA_TYPES for k in listed):
            return f"{what}.properties.{name}.type must be one of {', '.join(SCHEMA_TYPES)}, got {kinds!r}"
    return None


class _Strict(BaseModel):
    """Strict, closed: a value of another type or a key nobody knows is refused, never coerced or dropped."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class ClientFunction(_Strict):
    """One function of the client's: OpenAI's ``tools[].function``."""

    name: Annotated[str, Field(pattern=FUNCTION_NAME)] = Field(
        description="The function's name: letters, digits, '_' and '-', up to 64."
    )
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)] = Field(
        default="", description="What the function does, for the model."
    )
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="The function's arguments as JSON schema (an object).",
    )
    strict: bool | None = Field(default=None, description="OpenAI's structured-outputs flag, passed on.")

    @field_validator("parameters")
    @classmethod
    def _well_formed(cls, value: dict[str, Any]) -> dict[str, Any]:
        if problem := _schema_problem(value, "parameters"):
            raise ValueError(problem)
        return value

    def openai(self) -> dict[str, Any]:
        """The function as OpenAI's ``tools`` item, which a native tool-calling endpoint takes as it is."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


#: ``auto``: the model chooses; ``none``: no call; ``required``: some call; a name: that function.
ToolChoice = Literal["auto", "none", "required"] | Annotated[str, Field(pattern=FUNCTION_NAME)]


class ClientTools(_Strict):
    """The client's functions and its ``tool_choice``, for one run only."""

    functions: list[ClientFunction] = Field(
        min_length=1,
        max_length=MAX_CLIENT_TOOLS,
        description=f"The client's functions (OpenAI tools), 1 to {MAX_CLIENT_TOOLS}.",
    )
    choice: ToolChoice = Field(
        default="auto",
        description="auto, none, required, or the name of one of the functions the model must call.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        """Names unique, a named choice among them, and all the schemas together within the limit."""
        names = [f.name for f in self.functions]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"client tool names must be unique; given more than once: {', '.join(twice)}")
        if self.choice not in ("auto", "none", "required") and self.choice not in names:
            raise ValueError(f"tool_choice names {self.choice!r}, which is not one of the tools sent")
        size = len(json.dumps([f.openai() for f in self.functions]))
        if size > MAX_TOOLS_CHARS:
            raise ValueError(f"the tools come to {size} characters of JSON; the limit is {MAX_TOOLS_CHARS}")
        return self

    @property
    def names(self) -> frozenset[str]:
        """The client's function names."""
        return frozenset(f.name for f in self.functions)

    @property
    def forced(self) -> frozenset[str]:
        """The functions a reply must call: all for ``required``, the one named; none for auto or none."""
        if self.choice == "required":
            return self.names
        return frozenset() if self.choice in ("auto", "none") else frozenset({self.choice})

    def openai_choice(self) -> str | dict[str, Any]:
        """``tool_choice`` as an OpenAI endpoint takes it."""
        if self.choice in ("auto", "none", "required"):
            return self.choice
        return {"type": "function", "function": {"name": self.choice}}


class JsonSchemaFormat(_Strict):
    """OpenAI's ``response_format.json_schema``: a named schema the reply must follow."""

    name: Annotated[str, Field(pattern=FUNCTION_NAME)] = Field(description="The schema's name.")
    schema_: dict[str, Any] = Field(alias="schema", description="The reply's JSON schema (an object).")
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)] | None = None
    strict: bool | None = None

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _well_formed(cls, value: dict[str, Any]) -> dict[str, Any]:
        if problem := _schema_problem(value, "response_format.json_schema.schema"):
            raise ValueError(problem)
        return value


class ResponseFormat(_Strict):
    """OpenAI's ``response_format``: a JSON object, or JSON following a schema (``text`` needs nothing)."""

    type: Literal["json_object", "json_schema"] = Field(description="json_object or json_schema.")
    json_schema: JsonSchemaFormat | None = Field(default=None, description="For json_schema: the schema.")

    @model_validator(mode="after")
    def _schema_when_asked(self) -> Self:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("response_format json_schema needs a json_schema object, and only it takes one")
        return self

    def openai(self) -> dict[str, Any]:
        """The format as an OpenAI-compatible endpoint takes it (llama.cpp turns a schema into a grammar)."""
        if self.json_schema is None:
            return {"type": self.type}
        return {
            "type": self.type,
            "json_schema": self.json_schema.model_dump(by_alias=True, exclude_none=True),
        }
