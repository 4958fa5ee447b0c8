"""An in-process chat model for benchmarks: asks for given tool calls, then answers.

langchain-core's fake chat models do not implement ``bind_tools``; this one does (it ignores the tools),
so the same instance drives our graph and LangGraph's prebuilt agent alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class ToolThenAnswer(BaseChatModel):
    """First reply: the given tool calls; once tool results are present: a text answer."""

    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    answer: str = "done"

    @property
    def _llm_type(self) -> str:
        return "tool-then-answer"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolThenAnswer:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        if not self.calls or isinstance(messages[-1], ToolMessage):
            message = AIMessage(self.answer, response_metadata={"finish_reason": "stop"})
        else:
            calls = [
                {"name": n, "args": a, "id": f"call_{uuid.uuid4().hex[:10]}", "type": "tool_call"}
                for n, a in self.calls
            ]
            message = AIMessage("", tool_calls=calls, response_metadata={"finish_reason": "tool_calls"})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._reply(messages)
