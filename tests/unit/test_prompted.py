"""Prompted tool calling: every call of a reply is read, the catalog says what the model needs, the digest.

Replies marked with a BFCL question id were written by the embedded model (Qwen2.5-Coder-0.5B, temperature 0)
through ``bench/bfcl.py``; the others are the same shapes varied (two blocks, a key twice, near-JSON).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from workspace_agent.core.prompts import (
    ALREADY_RUN,
    ASK_NEXT_STEP,
    HELD,
    NAMED_UNUSED,
    PASSAGE_GIVEN,
    REPEATED,
    SEARCH_HEAD,
    SEARCH_HIT,
)
from workspace_agent.providers.prompted import digest, named_unused, parse_tool_calls, rules, withheld_call
from workspace_agent.providers.prompted.call_parsing import names_a_tool, parse_reply
from workspace_agent.providers.prompted.catalog import (
    acts,
    catalog,
    coerce,
    describe,
    fit_tools,
    placeholders,
    with_catalog,
)
from workspace_agent.skills.builtin import calculate

NAMES = {"calculate", "current_datetime"}
WEATHER = {"get_current_weather": ("location", "unit")}


def calls_of(text: str, tools: dict = WEATHER) -> list[tuple[str, dict]]:
    calls, invalid = parse_reply(text, tools)
    assert not invalid, invalid
    return [(c["name"], c["args"]) for c in calls]


# ------------------------------------------------------------------------------------------------ parsing


def test_plain_fenced_and_brace_doubled_json_are_calls():
    for text in [
        '{"name": "calculate", "arguments": {"expression": "2+2"}}',
        'Sure:\n```json\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n```',
        '{{"name": "calculate", "arguments": {{"expression": "2+2"}}}}',
        'I will use {"name": "calculate", "parameters": {"expression": "2+2"}} now',
        '{"name": "calculate", "arguments": "{\\"expression\\": \\"2+2\\"}"}',
    ]:
        calls = parse_tool_calls(text, NAMES)
        assert [(c["name"], c["args"]) for c in calls] == [("calculate", {"expression": "2+2"})], text


def test_a_json_list_gives_every_call_with_its_own_id():
    calls = parse_tool_calls(
        '[{"name": "calculate", "arguments": {"expression": "1"}}, '
        '{"name": "current_datetime", "arguments": {}}]',
        NAMES,
    )
    assert [c["name"] for c in calls] == ["calculate", "current_datetime"]
    assert len({c["id"] for c in calls}) == 2


def test_a_pretty_printed_fenced_call_is_read():
    text = (  # parallel_121, catalog before the fix
        '```json\n{\n  "name": "ecology.get_turtle_population",\n  "arguments": {\n'
        '    "location": "Galapagos Islands",\n    "year": 2015,\n    "species": true\n  }\n}\n```'
    )
    tools = {"ecology.get_turtle_population": ("location", "year", "species")}
    assert calls_of(text, tools) == [
        ("ecology.get_turtle_population", {"location": "Galapagos Islands", "year": 2015, "species": True})
    ]


def test_a_list_the_model_wrote_gives_both_calls():
    text = (  # live_parallel_8-4-0, catalog after the fix
        '[{"name": "todo", "arguments": {"type": "add", "content": "Machine Learning Study Session"}}, '
        '{"name": "todo", "arguments": {"type": "delete", "content": "todo random"}}]'
    )
    assert calls_of(text, {"todo": ("type", "content")}) == [
        ("todo", {"type": "add", "content": "Machine Learning Study Session"}),
        ("todo", {"type": "delete", "content": "todo random"}),
    ]


def test_several_fenced_blocks_are_several_calls():
    block = (
        '```json\n{\n  "name": "get_current_weather",\n  "arguments": {\n    "location": "%s"\n  }\n}\n```'
    )
    text = block % "Boston, MA" + "\n" + block % "San Francisco, CA"
    assert calls_of(text) == [
        ("get_current_weather", {"location": "Boston, MA"}),
        ("get_current_weather", {"location": "San Francisco, CA"}),
    ]


def test_objects_one_per_line_are_several_calls():
    text = (
        '{"name": "get_current_weather", "arguments": {"location": "Boston, MA"}}\n'
        '{"name": "get_current_weather", "arguments": {"location": "San Francisco, CA"}}'
    )
    assert [a["location"] for _, a in calls_of(text)] == ["Boston, MA", "San Francisco, CA"]


def test_a_call_nested_under_the_previous_one_is_split_out():
    text = (  # parallel_68, catalog before the fix: its "call:" line was copied as a key
        '{"name": "calculate_area", "arguments": {"base": 12, "height": 15, "unit": "cm"}, "call": '
        '{"name": "calculate_area", "arguments": {"base": 18, "height": 24, "unit": "cm"}}}'
    )
    assert calls_of(text, {"calculate_area": ("base", "height", "unit")}) == [
        ("calculate_area", {"base": 12, "height": 15, "unit": "cm"}),
        ("calculate_area", {"base": 18, "height": 24, "unit": "cm"}),
    ]
    deeper = (  # the same habit, one level further and inside the arguments
        '{"name": "get_current_weather", "arguments": {"location": "Boston, MA"}, "call": '
        '{"name": "get_current_weather", "arguments": {"location": "San Francisco, CA", "call": '
        '{"name": "get_current_weather", "arguments": {"location": "Chicago, IL"}}}}}'
    )
    assert calls_of(deeper) == [
        ("get_current_weather", {"location": "Boston, MA"}),
        ("get_current_weather", {"location": "San Francisco, CA"}),
        ("get_current_weather", {"location": "Chicago, IL"}),
    ]


def test_a_parameter_whose_value_looks_like_a_call_is_kept():
    tools = {"schedule": ("task",)}
    text = '{"name": "schedule", "arguments": {"task": {"name": "schedule", "arguments": {}}}}'
    assert calls_of(text, tools) == [("schedule", {"task": {"name": "schedule", "arguments": {}}})]


def test_a_key_given_twice_is_an_error_for_the_model_not_a_silent_choice():
    text = (
        '{"name": "get_current_weather", "arguments": '
        '{"location": "Boston, MA", "location": "San Francisco, CA"}}'
    )
    calls, invalid = parse_reply(text, WEATHER)
    assert calls == []
    (bad,) = invalid
    assert bad["name"] == "get_current_weather" and "'location'" in bad["error"]
    assert "Boston, MA" in bad["args"] and "San Francisco, CA" in bad["args"], "both values are shown back"


def test_near_json_is_accepted():
    text = "[{'name': 'get_current_weather', 'arguments': {'location': 'Boston, MA', 'unit': None,},},]"
    assert calls_of(text) == [("get_current_weather", {"location": "Boston, MA", "unit": None})]
    flags = '{"name": "set", "arguments": {"on": True, "off": False, "n": -1.5e2}}'
    assert calls_of(flags, {"set": ("on", "off", "n")}) == [("set", {"on": True, "off": False, "n": -150.0})]


def test_names_differing_in_dots_or_case_mean_the_known_tool():
    tools = {"spotify.play": ("artist",)}
    assert calls_of('{"name": "spotify_play", "arguments": {"artist": "X"}}', tools) == [
        ("spotify.play", {"artist": "X"})
    ]


def test_other_common_shapes():
    openai_style = (
        '{"type": "function", "function": {"name": "get_current_weather", "arguments": {"location": "A"}}}'
    )
    by_name = '{"get_current_weather": {"location": "B"}}'
    wrapped = '{"tool_calls": [{"name": "get_current_weather", "arguments": {"location": "C"}}]}'
    for text, where in ((openai_style, "A"), (by_name, "B"), (wrapped, "C")):
        assert calls_of(text) == [("get_current_weather", {"location": where})], text


def test_a_reply_cut_off_keeps_the_calls_that_were_complete():
    text = (
        '[{"name": "get_current_weather", "arguments": {"location": "A"}}, '
        '{"name": "get_current_weather", "arguments": {"location": "B"}}, '
        '{"name": "get_current_weather", "argu'
    )
    assert [a["location"] for _, a in calls_of(text)] == ["A", "B"]


def test_unknown_names_and_prose_mean_no_tool():
    assert parse_tool_calls('{"name": "rm_rf", "arguments": {}}', NAMES) == []
    assert parse_tool_calls("The answer is 4. {not json}", NAMES) == []
    assert parse_tool_calls("", NAMES) == []
    assert names_a_tool('{"name": "rm_rf", "arguments": {}}') and not names_a_tool("The answer is 4.")


# ------------------------------------------------------------------------------------------------ catalog


class Place(BaseModel):
    city: str = Field(description="City name")
    zip_code: int | None = None


def book(
    hotel: str,
    nights: int,
    place: Place,
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    tags: list[str] | None = None,
) -> str:
    """Book a hotel."""
    return "ok"


def test_catalog_shows_types_required_enums_object_fields_and_a_list_example():
    text = catalog([StructuredTool.from_function(book)])
    assert "JSON list, one object per call" in text
    assert "nights (integer, required)" in text
    assert 'unit (string, one of "celsius", "fahrenheit", default "celsius")' in text
    assert "place (object, required)" in text and "city (string, required): City name" in text
    assert "tags (list of string)" in text
    example = '[{"name": "book", "arguments": {"hotel": "<hotel>", "nights": <nights>, "place": {...}}}]'
    assert f"  example: {example}" in text
    assert "  call:" not in text, "a call: line gets copied as a key"


def test_json_schema_tools_and_pydantic_tools_are_described_alike():
    pydantic_tool = StructuredTool.from_function(calculate)
    schema = pydantic_tool.tool_call_schema.model_json_schema()
    mcp_like = StructuredTool(
        name="calculate", description=pydantic_tool.description, args_schema=schema, func=lambda **_: ""
    )
    assert isinstance(mcp_like.tool_call_schema, dict)
    assert describe(mcp_like) == describe(pydantic_tool)
    assert "expression (string, required)" in describe(mcp_like)


def test_with_catalog_appends_to_the_system_prompt():
    tool = StructuredTool.from_function(calculate)
    out = with_catalog([SystemMessage("be nice"), HumanMessage("hi")], [tool])
    assert out[0].content.startswith("be nice") and "- calculate:" in out[0].content


def test_a_catalog_too_large_keeps_the_tools_most_relevant_to_the_message():
    def tool(name: str, description: str) -> StructuredTool:
        schema = {"type": "object", "properties": {"q": {"type": "string", "description": description}}}
        return StructuredTool(name=name, description=description, args_schema=schema, func=lambda **_: "")

    tools = [tool(f"tool_{i}", f"Does unrelated thing {i} with widgets and gadgets") for i in range(30)]
    tools.insert(17, tool("weather_forecast", "Forecast the weather of a city for the next days"))
    kept, left_out = fit_tools(tools, "What will the weather be in Paris?", budget=400)
    assert "weather_forecast" in [t.name for t in kept]
    assert left_out and len(kept) + len(left_out) == 31
    assert fit_tools(tools, "anything", budget=None) == (tools, [])


def test_numbers_booleans_and_lists_written_as_strings_get_the_declared_type():
    schema = {
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "on": {"type": "boolean"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "s": {"type": "string"},
        }
    }
    args = {"n": "20", "x": "0.5", "on": "True", "ids": "[1, 2]", "s": "7", "extra": "3"}
    assert coerce(args, schema) == {"n": 20, "x": 0.5, "on": True, "ids": [1, 2], "s": "7", "extra": "3"}
    assert coerce({"n": "twenty"}, schema) == {"n": "twenty"}, "what does not read cleanly is left alone"


# ------------------------------------------------------------------------------------------------ digest


def test_digest_folds_results_and_unrun_calls_into_the_user_message():
    call = {"name": "calculate", "args": {"expression": "6*7"}, "id": "c1", "type": "tool_call"}
    bad = {
        "name": "calculate",
        "args": '{"expression": "1", "expression": "2"}',
        "id": "c2",
        "error": "twice",
        "type": "invalid_tool_call",
    }
    messages = [
        SystemMessage("s"),
        HumanMessage("what is 6*7?"),
        AIMessage("", tool_calls=[call], invalid_tool_calls=[bad]),
        ToolMessage("42", tool_call_id="c1"),
        ToolMessage("Not run", tool_call_id="c2", status="error"),
    ]
    out = digest(messages)
    assert [type(m) for m in out] == [SystemMessage, HumanMessage]
    assert 'calculate({"expression": "6*7"}) returned: 42' in out[1].content
    assert "was not run: twice" in out[1].content and out[1].content.startswith("what is 6*7?")
    assert ASK_NEXT_STEP in out[1].content, "the tools are offered again"
    last = digest(messages, more=False)[1].content
    assert "No more tools can be used" in last and "JSON list" not in last


def test_a_repeated_calls_result_is_read_once_in_the_digest():
    """The earlier result given again to a repeat (``approve``) is not written into the prompt twice."""
    call = {"name": "search_documents", "args": {"query": "refunds"}, "id": "c1", "type": "tool_call"}
    passages = "Refunds are paid within 30 days. " * 20
    messages = [
        HumanMessage("within how many days is a refund paid?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(passages, tool_call_id="c1"),
        AIMessage("", tool_calls=[call | {"id": "c2"}]),
        ToolMessage(passages + ALREADY_RUN, tool_call_id="c2"),
    ]
    text = digest(messages)[-1].content
    assert text.count(passages) == 1 and f'search_documents({{"query": "refunds"}}) {REPEATED}' in text
    rules.off.add("repeat_once")
    try:
        assert digest(messages)[-1].content.count(passages) == 2, "switched off, both are written"
    finally:
        rules.off.discard("repeat_once")


def test_a_searched_passage_the_document_context_holds_is_named_not_written_again():
    """Retrieval gave the FAQ; the model's search found it and another passage: only the new one is read."""
    faq = "**Does Lanternfish store pages?**\nNo. It keeps the first 2 KB of the error."
    fresh = "A check is marked down after three failed attempts in a row."
    user = f"Context:\n[CONTEXT 0]:\n<document_metadata>x</document_metadata>\n\n{faq}\n[END CONTEXT 0]\n\nQ?"
    found = render_hits(("faq.md", 0.63, faq), ("setup.md", 0.41, fresh))
    call = {"name": "search_documents", "args": {"query": "error kept"}, "id": "c1", "type": "tool_call"}
    messages = [HumanMessage(user), AIMessage("", tool_calls=[call]), ToolMessage(found, tool_call_id="c1")]
    text = digest(messages)[-1].content
    assert text.count(faq) == 1 and text.count(fresh) == 1
    assert f"[1] faq.md (similarity 0.63) {PASSAGE_GIVEN}\n\n[2] setup.md (similarity 0.41)\n{fresh}" in text
    rules.off.add("given_passages_once")
    try:
        assert digest(messages)[-1].content.count(faq) == 2, "switched off, the passage is read twice"
    finally:
        rules.off.discard("given_passages_once")


def render_hits(*hits: tuple[str, float, str]) -> str:
    """A search result as ``search_documents`` writes one."""
    parts = [SEARCH_HEAD.format(query="error kept")]
    parts += [
        f"{SEARCH_HIT.format(index=i, title=t, similarity=s)}\n{body}"
        for i, (t, s, body) in enumerate(hits, 1)
    ]
    return "\n\n".join(parts)


def test_the_digest_names_the_actions_the_question_asks_for_that_have_not_run_yet():
    def tool(name: str) -> StructuredTool:
        return StructuredTool.from_function(lambda: "", name=name, description="A tool.")

    names = ("calculate", "save_note", "save_to_workspace", "weather-get_forecast", "ab", "search_documents")
    tools = [tool(n) for n in names]
    call = {"name": "calculate", "args": {"expression": "58*17"}, "id": "c1", "type": "tool_call"}
    question = "Calculate 58*17, store the answer in a note and give me the forecasts from my documents"
    messages = [HumanMessage("Context: ... workspace ...\n\n" + question)]
    assert named_unused(question, messages, tools) == ["save_note", "weather-get_forecast"], (
        "actions only (a tool not known to be read-only acts): not calculate, not search_documents"
    )
    messages += [AIMessage("", tool_calls=[call]), ToolMessage("986", tool_call_id="c1")]
    note = call | {"name": "save_note", "args": {"text": "986"}, "id": "c2"}
    ran = [*messages, AIMessage("", tool_calls=[note]), ToolMessage("saved", tool_call_id="c2")]
    assert named_unused(question, ran, tools) == ["weather-get_forecast"], "a tool that ran is not named"
    assert named_unused("Which documents are in this workspace?", messages, tools) == [], (
        "a lookup the question words resemble is the model's choice, not pressed on it"
    )
    named = named_unused(question, messages, tools)
    text = digest(messages, named=named)[-1].content
    assert text.endswith(NAMED_UNUSED.format(tools="save_note, weather-get_forecast") + ASK_NEXT_STEP)
    assert named_unused("what is 6*7?", messages, tools) == [], "a question that names no tool"
    assert "names" not in digest(messages, named=[])[-1].content


def test_a_call_that_cannot_run_reaches_the_person_as_words_with_what_the_tools_returned():
    call = {"name": "lookup", "args": {"key": "k"}, "id": "c1", "type": "tool_call"}
    messages = [
        HumanMessage("earlier"),
        AIMessage("an earlier answer"),
        HumanMessage("look up k, then record it"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("v=7", tool_call_id="c1"),
    ]
    text = withheld_call(messages, "this turn's 1 tool calls are spent")
    assert "{" not in text and "tool calls are spent" in text, "no call JSON, not even in the results"
    assert "- lookup: v=7" in text


def test_a_slot_written_for_a_result_not_yet_had_is_sent_back_but_angle_brackets_in_text_pass():
    schemas = {
        "secret_code": {"properties": {"name": {"type": "string"}}},
        "calculate": {"properties": {"expression": {"type": "string"}}},
        "save_note": {"properties": {"text": {"type": "string"}}},
    }
    assert placeholders({"expression": "3 * <secret_code>"}, schemas) == ["<secret_code>"]
    assert placeholders({"text": "the total is <result>"}, schemas) == ["<result>"]
    assert placeholders({"expression": "<expression>"}, schemas) == ["<expression>"]
    assert placeholders({"text": "use <b>bold</b> and a<b"}, schemas) == []
    assert placeholders({"expression": "3 * 4817"}, schemas) == []
    shell = "Today's weekday is: $(current_datetime | jq '.weekday')"  # the 1.5B, with no example line
    schemas["current_datetime"] = {}
    assert placeholders({"text": shell}, schemas) == ["$(current_datetime | jq '.weekday')"]
    assert placeholders({"text": "it is {{ result }} or ${secret_code}"}, schemas) == [
        "{{ result }}",
        "${secret_code}",
    ]
    assert placeholders({"text": "costs $(5) or {{braces}} or ${HOME}"}, schemas) == []
    read = "(2050 - (current_datetime['year']))"  # the 1.5B, in one list with current_datetime
    assert placeholders({"expression": read}, schemas) == ["current_datetime['year']"]
    assert placeholders({"expression": "secret_code().value * 3"}, schemas) == ["secret_code().value"]
    assert placeholders({"text": "current_datetime is a tool. So is calculate."}, schemas) == []


def test_a_call_that_changes_something_waits_only_behind_a_lookup_in_its_own_list():
    from workspace_agent.providers.prompted import _ready

    schemas = {n: {"properties": {"x": {"type": "string"}}} for n in ("calculate", "save_note", "mcp-read")}

    def order(*names: str) -> tuple[list[str], list[str]]:
        calls = [{"name": n, "args": {"x": "1"}, "id": f"c{i}"} for i, n in enumerate(names)]
        ready, waiting = _ready(calls, schemas, {"save_note"})
        assert all(HELD == w["error"] for w in waiting)
        return [c["name"] for c in ready], [w["name"] for w in waiting]

    assert order("calculate", "save_note") == (["calculate"], ["save_note"])
    assert order("save_note", "calculate") == (["save_note", "calculate"], [])
    assert order("save_note", "save_note") == (["save_note", "save_note"], [])
    assert order("mcp-read", "save_note", "calculate") == (["mcp-read", "calculate"], ["save_note"])


def test_a_tool_acts_unless_it_is_a_read_only_builtin_or_says_it_only_reads():
    def tool(name: str, metadata: dict | None = None) -> StructuredTool:
        return StructuredTool(name=name, description="d", args_schema={}, func=lambda: "", metadata=metadata)

    assert not acts(tool("calculate")) and not acts(tool("search_documents"))
    assert acts(tool("save_note")) and acts(tool("my_own_tool"))
    assert not acts(tool("files-read", {"readOnlyHint": True}))
    assert acts(tool("files-write", {"readOnlyHint": False, "destructiveHint": True}))
