"""Prompted tool calling, for models that cannot call tools natively (AnythingLLM's "untooled" path).

The tools are described in the system prompt and the model answers with JSON naming a tool; small local
models do this reliably only in plain text (often fenced, sometimes with doubled braces), so the reply is
parsed leniently and anything that does not name a known tool is an ordinary answer. After one round of
tool calls the model answers from a plain-text digest of the results: small models follow a digest far
better than raw tool messages they were never trained on.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from workspace_agent.providers.tokens import message_text

INSTRUCTIONS = (
    "You can call these tools. When one of them helps answer the user, reply with JSON only, no other text: "
    '{"name": "<tool name>", "arguments": {...}} — or a JSON list of such objects to call several tools. '
    "When no tool helps, answer the user normally in plain text."
)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def catalog(tools: list[BaseTool]) -> str:
    """The tools as the model reads them: name, purpose, arguments, and the exact JSON that calls each.

    Small models copy what they see: shown a JSON schema they send the schema back as arguments, so each
    tool is shown as a ready call with placeholders instead.
    """
    blocks = []
    for tool in tools:
        raw = tool.tool_call_schema or {}
        schema = raw if isinstance(raw, dict) else raw.model_json_schema()
        props = schema.get("properties", {})
        args = "; ".join(
            f"{k} ({v.get('type', 'any')}): {v.get('description', '')}".rstrip(": ") for k, v in props.items()
        )
        example = json.dumps({"name": tool.name, "arguments": {k: f"<{k}>" for k in props}})
        blocks.append(f"- {tool.name}: {tool.description}\n  arguments: {args or 'none'}\n  call: {example}")
    return INSTRUCTIONS + "\n\nTools:\n" + "\n".join(blocks)


def names_a_tool(text: str) -> bool:
    """Whether a reply is shaped like a tool call at all, known name or not."""
    for candidate in _candidates(text):
        value = _load(candidate)
        items = value if isinstance(value, list) else [value]
        if any(isinstance(i, dict) and "name" in i for i in items):
            return True
    return False


def _candidates(text: str) -> list[str]:
    found = [m.strip() for m in _FENCE.findall(text)]
    stripped = text.strip()
    found.append(stripped)
    start = min((i for i in (stripped.find("{"), stripped.find("[")) if i >= 0), default=-1)
    if start >= 0:
        found.append(stripped[start:])
    return found


def _load(candidate: str) -> Any:
    for variant in (candidate, candidate.replace("{{", "{").replace("}}", "}")):
        try:
            return json.JSONDecoder().raw_decode(variant)[0]
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def parse_tool_calls(text: str, names: set[str]) -> list[dict[str, Any]]:
    """Tool calls a reply asks for, as LangChain tool calls; none when it names no known tool."""
    for candidate in _candidates(text):
        value = _load(candidate)
        items = value if isinstance(value, list) else [value]
        calls = []
        for item in items:
            if not isinstance(item, dict) or item.get("name") not in names:
                continue
            args = item.get("arguments", item.get("parameters", item.get("args", {})))
            if isinstance(args, str):
                args = _load(args) or {}
            calls.append(
                {
                    "name": item["name"],
                    "args": args if isinstance(args, dict) else {},
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "tool_call",
                }
            )
        if calls:
            return calls
    return []


def digest(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Fold this turn's tool calls and results into the user message as plain text."""
    first_ai = next((i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls), None)
    if first_ai is None:
        return messages
    head, exchange = messages[:first_ai], messages[first_ai:]
    results = {m.tool_call_id: message_text(m) for m in exchange if isinstance(m, ToolMessage)}
    lines = [
        f"- {c['name']}({json.dumps(c['args'], ensure_ascii=False)}) returned: {results.get(c['id'], '-')}"
        for m in exchange
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]
    user = head[-1]
    note = (
        "\n\nTool results for this question:\n"
        + "\n".join(lines)
        + "\nAnswer the question briefly from these results, in plain sentences, without code."
    )
    return [*head[:-1], HumanMessage(message_text(user) + note)]


def with_catalog(messages: list[BaseMessage], tools: list[BaseTool]) -> list[BaseMessage]:
    """The request with the tool catalog appended to the system prompt."""
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(message_text(messages[0]) + "\n\n" + catalog(tools)), *messages[1:]]
    return [SystemMessage(catalog(tools)), *messages]


async def prompted_turn(
    model: Any, request: list[BaseMessage], tools: list[BaseTool]
) -> tuple[AIMessage, bool]:
    """One model call with the tools described in the prompt; the reply's JSON calls become tool calls.

    Returns the reply and whether it named a tool that does not exist (then the model was asked again
    without tools, and the second reply is returned).
    """
    response = await model.with_config(tags=["nostream"]).ainvoke(with_catalog(request, tools))
    if response.response_metadata.get("finish_reason") == "length":
        return response, False
    text = message_text(response)
    calls = parse_tool_calls(text, {t.name for t in tools})
    if calls:
        meta = response.response_metadata
        return AIMessage("", tool_calls=calls, id=response.id, response_metadata=meta), False
    if names_a_tool(text):
        return await model.ainvoke(request), True
    return response, False
