"""The llama.cpp call grammar: what it lets a reply be, read from the rules it writes.

Whether llama.cpp accepts the text is checked against the real server in
``tests/integration/test_local_grammar.py`` (marker ``local_model``).
"""

from __future__ import annotations

import re
from typing import Literal

from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel

from workspace_agent.providers.prompted.call_grammar import call_grammar
from workspace_agent.providers.prompted.catalog import schema_of


def rules(grammar: str) -> dict[str, str]:
    """Rule name → body."""
    return dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)


def json_tool(name: str, schema: dict) -> StructuredTool:
    """A tool carrying a JSON-schema dict, as MCP tools do."""
    return StructuredTool(name=name, description="d", args_schema=schema, func=lambda **_: "")


def grammar_of(*tools: StructuredTool) -> dict[str, str]:
    return rules(call_grammar(list(tools), {t.name: schema_of(t) for t in tools}))


WEATHER = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "location": {"type": "string"},
        "days": {"type": "integer"},
    },
    "required": ["location"],
}


def test_a_reply_is_text_or_calls_of_the_offered_tools_only():
    g = grammar_of(json_tool("get_weather", WEATHER), json_tool("calc.add", {"type": "object"}))
    assert g["root"] == 'calls | "```json" ws calls ws "```" | text'
    assert set(re.findall(r"call-[\w-]+", g["call"])) == {"call-get-weather", "call-calc-add"}
    assert '"\\"get_weather\\""' in g["call-get-weather"] and '"\\"calc.add\\""' in g["call-calc-add"]
    # Free text may start with anything but the characters that open calls.
    assert g["text"].startswith(r"[^\[{`\x00]")


def test_required_arguments_come_first_and_optional_ones_may_be_left_out():
    g = grammar_of(json_tool("get_weather", WEATHER))
    body = g["get-weather-obj"]
    location, unit, days = (body.index(f'"\\"{k}\\""') for k in ("location", "unit", "days"))
    assert location < unit < days
    assert body.count(")?") == 2, "unit and days are each optional"
    assert '"\\"location\\"" ws ":" ws string' in body and " integer" in body
    assert g["get-weather-unit-enum"] == '"\\"celsius\\"" | "\\"fahrenheit\\""'


def test_with_no_required_argument_any_one_may_come_first_without_a_comma():
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "boolean"}}}
    body = grammar_of(json_tool("pick", schema))["pick-obj"]
    assert body.startswith('"{" ws ( ( "\\"a\\"" ws ":" ws number ( ws "," ws "\\"b\\""')
    assert '| ( "\\"b\\"" ws ":" ws boolean )' in body and body.endswith(')? ws "}"')


def test_pydantic_and_json_schema_tools_give_the_same_rules():
    class Args(BaseModel):
        location: str
        unit: Literal["celsius", "fahrenheit"] | None = None

    @tool("get_weather", args_schema=Args)
    def native(location: str, unit: str | None = None) -> str:
        """d"""
        return ""

    plain = {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["location"],
    }
    assert grammar_of(native) == grammar_of(json_tool("get_weather", plain))


def test_lists_nested_objects_and_unions_are_followed():
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
            "id": {"type": ["integer", "string"]},
        },
        "required": ["tags", "where", "id"],
    }
    g = grammar_of(json_tool("put", schema))
    assert g["put-tags-list"] == '"[" ws ( string ( ws "," ws string ){0,50} )? ws "]"'
    pairs = '"\\"lat\\"" ws ":" ws number ws "," ws "\\"lon\\"" ws ":" ws number'
    assert g["put-where-obj"] == f'"{{" ws {pairs} ws "}}"'
    assert g["put-id-any"] == "integer | string"


def test_what_is_not_translated_allows_any_json_value_rather_than_forbidding_a_valid_call():
    schema = {
        "type": "object",
        "properties": {
            "loose": {"patternProperties": {"^x": {"type": "string"}}},
            "cyclic": {"$ref": "#/$defs/Node"},
        },
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "required": ["loose"],
    }
    g = grammar_of(json_tool("odd", schema))
    assert '"\\"loose\\"" ws ":" ws value' in g["odd-obj"]
    assert any("value" in body for name, body in g.items() if name.startswith("odd-cyclic"))
