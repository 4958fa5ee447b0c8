"""A model call that says what it is doing, and streams a prompted reply once it shows itself as text.

LangGraph streams a chat model's tokens to ``stream_mode="messages"`` through its callbacks. A prompted reply
cannot go that way as it comes: until its first characters arrive nobody knows whether it is an answer or a
list of calls, and calls must never reach a person as text. Nor may a text reply that goes on with a call or
copies the results' digest: from its first brace or code fence on, the rest is held back (``safe_end``).
So the request is sent untagged for streaming, its chunks are read here, and once the first characters show
text (under the call grammar a list of calls starts with ``[``, ``{`` or a fenced JSON block, text with
anything else) the chunks so far and every later one are handed to the turn's callbacks as one chat model
run of their own. Clients see an ordinary streamed message; the final message carries the same id, so it is
not shown twice.

While nothing shows yet the model is reading a prompt that can take a minute on two cores: the call also
writes ``{"progress": "reading"}`` when it is sent and ``{"progress": "writing"}`` at its first token to the
``custom`` stream, for a client to say so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal
from uuid import uuid4

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, message_chunk_to_message
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult
from langgraph.config import get_config, get_stream_writer

from ...core.conversation import message_text

FENCE = "```json"
#: Where the machinery may begin inside a text reply: a code fence, a brace (a call's JSON, a digest line
#: ``- calculate({...}) returned: ...``) or a document text's delimiter ("[END CONTEXT 3]", which the 1.5B
#: copied after earlier exchanges). Prose needs none of them, so the text from the first of them on is held
#: back from the stream; the finished reply reaches the person through the turn's state, where the graph has
#: read the call out of it, cut the delimiters or put the answer in words.
HOLD_FROM = ("```", "{", "[CONTEXT ", "[END CONTEXT ", "<document_metadata>", "</document_metadata>")


def progress(phase: str, **details: Any) -> None:
    """Tell the turn's ``custom`` stream what is happening; outside a running graph, nobody listens."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer({"progress": phase, **details})


def safe_end(text: str) -> int:
    """How much of a text reply may stream: up to where the machinery may begin (``HOLD_FROM``).

    A marker not yet whole at the end (a lone backtick, "[END") is held back too, until the next chunk tells.
    """
    found = [i for i in (text.find(marker) for marker in HOLD_FROM) if i >= 0]
    if found:
        return min(found)
    tail = max((n for m in HOLD_FROM for n in range(1, len(m)) if text.endswith(m[:n])), default=0)
    return len(text) - tail


def reply_kind(text: str) -> Literal["text", "calls"] | None:
    """What a prompted reply is, from its first characters: ``None`` while they do not tell yet."""
    head = text.lstrip()
    if not head:
        return None
    if head[0] in "[{" or head.startswith(FENCE):
        return "calls"
    return None if FENCE.startswith(head) else "text"


class _Relay:
    """One chat model run, opened on the turn's callbacks, that hands a text reply's chunks to the stream."""

    def __init__(self, run: Any, message_id: str) -> None:
        self.run, self.id = run, message_id

    @classmethod
    async def open(cls, prompt: list[BaseMessage], message_id: str) -> _Relay | None:
        try:
            config = get_config()
        except RuntimeError:  # not inside a graph: nothing to stream to
            return None
        manager = AsyncCallbackManager.configure(
            config.get("callbacks"),
            inheritable_tags=config.get("tags"),
            inheritable_metadata=config.get("metadata"),
        )
        runs = await manager.on_chat_model_start({"name": "prompted-answer"}, [prompt], run_id=uuid4())
        return cls(runs[0], message_id)

    async def send(self, text: str) -> None:
        if not text:
            return
        chunk = AIMessageChunk(content=text, id=self.id)
        await self.run.on_llm_new_token(text, chunk=ChatGenerationChunk(message=chunk))

    async def close(self, message: AIMessage) -> None:
        await self.run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]))


async def ask(
    model: Any, options: dict[str, Any], prompt: list[BaseMessage], *, show_text: bool = False
) -> AIMessage:
    """The model's reply to ``prompt``, streamed to the turn only when ``show_text`` and it is text.

    Args:
        model: The chat model.
        options: Request options bound to the call (``max_tokens``, the grammar, logprobs).
        prompt: The messages sent.
        show_text: The reply is written under the call grammar, so its first characters decide whether it
            is text; without the grammar a reply may open with words and go on with a call, and is never
            streamed.
    """
    caller = (model.bind(**options) if options else model).with_config(tags=["nostream"])
    progress("reading")
    whole: AIMessageChunk | None = None
    relay: _Relay | None = None
    kind = None if show_text else "calls"
    sent = 0  # characters of the reply streamed so far
    chunks: AsyncIterator[AIMessageChunk] = caller.astream(prompt)  # a chat model's, bound: it streams these
    async for chunk in chunks:
        if whole is None:
            progress("writing")
        whole = chunk if whole is None else whole + chunk
        if kind is None and (kind := reply_kind(message_text(whole))) == "text":
            whole.id = whole.id or f"prompted-{uuid4()}"
            relay = await _Relay.open(prompt, whole.id)
        if relay is not None:  # what was held back while the kind was unknown goes out first
            text = message_text(whole)
            end = max(safe_end(text), sent)
            await relay.send(text[sent:end])
            sent = end
    if whole is None:
        raise RuntimeError("the model sent no reply at all")
    message = message_chunk_to_message(whole)
    assert isinstance(message, AIMessage)
    if relay is not None:
        text = message_text(message)
        if not any(marker in text for marker in HOLD_FROM):
            await relay.send(text[sent:])  # the end held back in case a marker began there
        await relay.close(message)
    return message
