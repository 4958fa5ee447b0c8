"""The conversation in state: how the thread's ``messages`` are read, folded and given to the model.

The thread's ``messages`` are what a client shows and what the model is given: the newest ``history_limit``
earlier exchanges, each folded to the user message as typed and the final answer, then the running turn in
full. History is read from the checkpoint, never from the chat log by thread id, so a fork or a replay from
an earlier checkpoint gives the model the conversation as it was there, not later turns of another branch.

These are the shared readings of that shape: where the running turn starts, what the model reads for a user
message, which blocks are attachments, how the previous turn is folded in. Several nodes need them
(``route`` folds, ``load_history`` and ``trim`` read the history, ``finish`` logs the exchange,
``ingest_uploads`` reads the attachments), so they live here rather than in any one node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage

from .prompts import ALREADY_RUN, PASSAGE_GIVEN, SEARCH_HEAD, SEARCH_HIT


def message_text(message: BaseMessage | dict) -> str:
    """The text a message carries, with content blocks joined (web clients send lists of blocks)."""
    content = message.get("content", "") if isinstance(message, dict) else message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


#: What a message starts with to ask for the tool-using agent (``route``, A3); the model never reads it.
AGENT_PREFIX = "@agent"
#: Id prefix of the tool messages ``execute_tool`` writes: the result of a call that ran, told apart from
#: the answers given for calls that did not run.
EXECUTED_PREFIX = "wa-tool-"
#: ``response_metadata`` flag of an answer shown in the thread but never given to the model (a refusal).
EXCLUDED = "excluded_from_history"
ATTACHMENT_TYPES = ("file", "image", "text-plain", "image_url", "audio")
#: Keys of a content block that carry a file's bytes, in any client's form (``text`` for plain-text blocks).
BYTE_KEYS = ("data", "base64", "file", "image_url", "text")


def turn_start(messages: Sequence[BaseMessage]) -> int:
    """Index of the running turn's user message: the last user message of the thread (0 if it has none)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)), 0)


def turn_question(messages: Sequence[BaseMessage]) -> HumanMessage | None:
    """The running turn's user message, or ``None`` when the messages hold none."""
    found = messages[turn_start(messages)] if messages else None
    return found if isinstance(found, HumanMessage) else None


def call_key(call: Mapping[str, Any]) -> str:
    """What makes two calls the same request: the tool and its arguments (in any key order)."""
    return json.dumps([call["name"], call["args"]], sort_keys=True, default=str)


def attachments(message: BaseMessage) -> list[dict[str, Any]]:
    """The file and image content blocks of a message (web clients send dropped files as these)."""
    content = message.content
    if isinstance(content, str):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in ATTACHMENT_TYPES]


def _without_prefix(text: str) -> str:
    return text[len(AGENT_PREFIX) :].strip() if text.startswith(AGENT_PREFIX) else text


def turn_asked(messages: Sequence[BaseMessage]) -> str:
    """What the running turn asks: its user message's text without ``@agent`` ("" when there is none).

    Retrieval, recall, tool choice and the prompted loop read this. ``@agent`` chooses the route; it is no
    word of the question. Left in a search query, it matched the sample FAQ's "workspace-agent" at cosine
    0.30-0.34, over the 0.25 threshold, so every agent turn (a sum, the weekday, "Which ocean is the
    largest?") was given that passage and offered ``search_documents``.
    """
    question = turn_question(messages)
    return _without_prefix(message_text(question)) if question is not None else ""


def prompt_text(message: BaseMessage) -> str:
    """What the model reads for a user message: its text without ``@agent``, and a line per attachment.

    ``@agent`` is an instruction to ``route``, not to the model; it stays in the thread where it was typed.
    An attachment is named with what became of it (``uploads`` records that in the block's ``outcome``).
    """
    typed = message_text(message)
    text = _without_prefix(typed)
    if typed.startswith(AGENT_PREFIX) and not text:
        text = "Hello!" if not attachments(message) else ""
    notes = [f"[Attached {block_name(b)}: {b.get('outcome') or 'not read'}]" for b in attachments(message)]
    return "\n\n".join(part for part in (text, *notes) if part)


def given_name(block: dict[str, Any]) -> str | None:
    """The file name a content block carries, wherever its format puts it; None when it carries none."""
    for holder in (block, block.get("metadata") or {}, block.get("extras") or {}, block.get("file") or {}):
        if isinstance(holder, dict):
            for key in ("filename", "name", "title"):
                if isinstance(holder.get(key), str) and holder[key].strip():
                    return holder[key].strip()
    return None


def is_image(block: dict[str, Any]) -> bool:
    """Whether a block is an image, by its type or its MIME type (Agent Chat UI once sent images as files)."""
    mime = str(block.get("mime_type") or block.get("mimeType") or "")
    return block.get("type") in ("image", "image_url") or mime.lower().startswith("image/")


def block_name(block: dict[str, Any]) -> str:
    """The file name a content block carries, or words for it when it has none."""
    return given_name(block) or f"the attached {block.get('type', 'file')}"


def _is_answer(m: BaseMessage) -> bool:
    return isinstance(m, AIMessage) and not m.tool_calls and not m.invalid_tool_calls


def exchanges(earlier: Sequence[BaseMessage]) -> list[tuple[HumanMessage, AIMessage]]:
    """The finished exchanges among earlier messages: each user message and its turn's final answer.

    A turn that never got an answer (its approval abandoned, the model failing) has no exchange: the chat
    log never recorded it either, and its tool calls must not look answered.
    """
    pairs: list[tuple[HumanMessage, AIMessage]] = []
    user: HumanMessage | None = None
    answer: AIMessage | None = None
    for m in [*earlier, HumanMessage("")]:
        if isinstance(m, HumanMessage):
            if user is not None and answer is not None:
                pairs.append((user, answer))
            user, answer = m, None
        elif _is_answer(m):
            answer = m  # type: ignore[assignment]
        elif isinstance(m, AIMessage):
            answer = None  # a later tool call means the turn went on
    return pairs


def _lean_block(block: Any) -> Any:
    """A content block without a file's bytes, except an image ``ingest_uploads`` kept for the client to show.

    Such an image carries its ``outcome`` and was within the message's caps (its bytes would be gone
    otherwise); dropping them at the next turn's fold would leave a broken image in the conversation.
    """
    if not isinstance(block, dict) or (block.get("outcome") and is_image(block)):
        return block
    return {k: v for k, v in block.items() if k not in ("data", "base64")}


def _lean_content(content: Any) -> Any:
    """Content without the bytes of attachments: the file is in the workspace, its name stays."""
    return content if isinstance(content, str) else [_lean_block(b) for b in content]


def fold(earlier: Sequence[BaseMessage], limit: int) -> list[BaseMessage]:
    """The newest ``limit`` finished exchanges, each as its user message and its final answer.

    The copies keep ids and content (``@agent`` where it was typed) and drop what only the running turn
    needs: response metadata, tool calls and their results, attachment bytes. So the thread's size is
    bounded by ``history_limit`` however long it grows; earlier tool calls and decisions stay reachable
    through the checkpoint history.
    """
    kept = exchanges(earlier)[-limit:] if limit > 0 else []
    out: list[BaseMessage] = []
    for user, answer in kept:
        out.append(HumanMessage(content=_lean_content(user.content), id=user.id))
        excluded = {EXCLUDED: True} if answer.response_metadata.get(EXCLUDED) else {}
        out.append(AIMessage(content=answer.content, id=answer.id, response_metadata=excluded))
    return out


def fold_update(earlier: Sequence[BaseMessage], limit: int) -> list[BaseMessage]:
    """The ``messages`` update that folds the earlier messages (see ``fold``), as a delta.

    Messages that stay unchanged are not written again: only removals and the lean copies that replace a
    message in place (same id), so a turn's checkpoint does not carry the whole conversation.
    """
    kept = {m.id: m for m in fold(earlier, limit)}
    update: list[BaseMessage] = []
    for m in earlier:
        if m.id not in kept:
            update.append(RemoveMessage(id=m.id))  # type: ignore[arg-type]
        elif kept[m.id] != m:
            update.append(kept[m.id])
    return update


def conversation(
    messages: Sequence[BaseMessage], limit: int | None = None
) -> tuple[list[dict[str, str]], list[BaseMessage]]:
    """The history the model is given, as ``{"prompt", "response"}`` texts, and the running turn.

    The newest ``limit`` finished exchanges of the thread's state go in, except answers excluded from
    history (a query-mode refusal is shown but never given back, as AnythingLLM stores it with ``include``
    false).
    """
    start = turn_start(messages)
    history = [
        {"prompt": prompt_text(user), "response": message_text(answer)}
        for user, answer in exchanges(messages[:start])
        if not answer.response_metadata.get(EXCLUDED)
    ]
    if limit is not None:
        history = history[-limit:] if limit > 0 else []
    return history, list(messages[start:])


_SEARCH_HEAD = re.compile(re.escape(SEARCH_HEAD).replace(re.escape("{query}"), ".*?") + r"\s*")
_SEARCH_HIT = re.compile(
    re.escape(SEARCH_HIT)
    .replace(re.escape("{index}"), r"\d+")
    .replace(re.escape("{title}"), r"(?P<title>.+?)")
    .replace(re.escape("{similarity:.2f}"), r"[\d.]+")
)


def _passages(text: str) -> str:
    """A document search's result as a person reads it: each passage after its document's name."""
    if not _SEARCH_HEAD.match(text):
        return text
    return _SEARCH_HIT.sub(lambda hit: f"{hit['title']}:", _SEARCH_HEAD.sub("", text, count=1))


def passages_given_once(result: str, given: str) -> str:
    """A document search's result with each passage that ``given`` holds already named, not repeated.

    Args:
        result: A tool's result; anything but a search's passages comes back as it is.
        given: The text the model reads already (the user message with its document context).
    """
    if not _SEARCH_HEAD.match(result):
        return result
    labels = list(_SEARCH_HIT.finditer(result))
    parts = [result[: labels[0].start()] if labels else result]
    for label, following in zip(labels, [*labels[1:], None], strict=True):
        body = result[label.end() : following.start() if following else len(result)]
        if body.strip() and body.strip() in given:
            body = f" {PASSAGE_GIVEN}" + ("\n\n" if following else "")
        parts.append(label[0] + body)
    return "".join(parts)


def results_in_words(turn: Sequence[BaseMessage], limit: int = 400) -> list[str]:
    """The turn's tool results as a person reads them: a line per result, the tool's name and its words.

    A document search's passages follow their document's name, without the query or the scores.

    Never a call's arguments or JSON: this is what a person is shown when the model's own answer cannot be
    (a call that could not run, figures no source holds), so it must not read like the machinery. A repeated
    call's result is the earlier one given again (``ALREADY_RUN``): it is shown once, without that note.
    """
    names = {c["id"]: c["name"] for m in turn if isinstance(m, AIMessage) for c in m.tool_calls}
    lines: list[str] = []
    for m in turn:
        if isinstance(m, ToolMessage) and m.status != "error":
            text = _passages(message_text(m).removesuffix(ALREADY_RUN))
            name = (names.get(m.tool_call_id) or m.name or "a tool").replace("_", " ")  # words, not code
            line = f"- {name}: {' '.join(text.split())[:limit]}"
            if line not in lines:
                lines.append(line)
    return lines
