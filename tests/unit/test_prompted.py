"""Prompted tool calling: lenient parsing of JSON tool calls written as text, and the results digest."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool

from workspace_agent.providers.prompted import catalog, digest, names_a_tool, parse_tool_calls, with_catalog
from workspace_agent.skills.builtin import calculate

NAMES = {"calculate", "current_datetime"}


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


def test_a_list_names_several_calls():
    calls = parse_tool_calls(
        '[{"name": "calculate", "arguments": {"expression": "1"}}, '
        '{"name": "current_datetime", "arguments": {}}]',
        NAMES,
    )
    assert [c["name"] for c in calls] == ["calculate", "current_datetime"]
    assert len({c["id"] for c in calls}) == 2


def test_unknown_names_and_prose_mean_no_tool():
    assert parse_tool_calls('{"name": "rm_rf", "arguments": {}}', NAMES) == []
    assert parse_tool_calls("The answer is 4. {not json}", NAMES) == []
    assert parse_tool_calls("", NAMES) == []
    assert names_a_tool('{"name": "rm_rf", "arguments": {}}') and not names_a_tool("The answer is 4.")


def test_catalog_describes_tools_in_the_system_prompt():
    tool = StructuredTool.from_function(calculate)
    text = catalog([tool])
    assert "calculate" in text and "expression (string)" in text
    assert '{"name": "calculate", "arguments": {"expression": "<expression>"}}' in text
    out = with_catalog([SystemMessage("be nice"), HumanMessage("hi")], [tool])
    assert out[0].content.startswith("be nice") and "calculate" in out[0].content


def test_digest_folds_results_into_the_user_message():
    call = {"name": "calculate", "args": {"expression": "6*7"}, "id": "c1", "type": "tool_call"}
    messages = [
        SystemMessage("s"),
        HumanMessage("what is 6*7?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("42", tool_call_id="c1"),
    ]
    out = digest(messages)
    assert [type(m) for m in out] == [SystemMessage, HumanMessage]
    assert 'calculate({"expression": "6*7"}) returned: 42' in out[1].content
    assert out[1].content.startswith("what is 6*7?")
