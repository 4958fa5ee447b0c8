"""OpenAI-compatible routes under ``/v1``: a workspace is a model, as in AnythingLLM's ``/v1/openai``.

- ``GET /v1/models``: one model per workspace the caller has an assistant for, plus ``default``.
- ``POST /v1/chat/completions``: stateless, as OpenAI's and AnythingLLM's are. The request's messages are the
  conversation: each call runs one turn of the ``agent`` graph on a new thread of the caller's, with the
  earlier messages as the thread's history (``load_history`` folds and trims them by the workspace's
  settings), then deletes the thread. A ``system`` message replaces the workspace's prompt; ``max_tokens``
  becomes the turn's ``max_tokens`` and ``reply_reserve``, ``temperature`` its ``temperature``. The ``finish``
  node logs the exchange to the workspace's chat log, as for any turn. Sources go in a ``sources`` field
  beside ``choices`` (of the completion, and of the last chunk when streaming), which OpenAI clients ignore.
  ``usage`` is what the model server reported for the turn's model calls; where it reported nothing (a
  streamed call it was not asked to count), the tokens are estimated and ``usage.estimated`` says so.
  What the workspace's agent cannot honour is refused with 400 rather than ignored: ``n`` above 1 and the
  deprecated ``functions`` (see ``refuse_unsupported``).
- ``response_format`` ``json_object`` or ``json_schema`` makes the turn a chat turn whose model call is
  bound with it (``Context.response_format``): the embedded llama.cpp server turns a schema into a
  grammar, a hosted model takes it as sent; no tool catalog or call grammar shapes that reply, and the
  answer's text is the JSON.
- A client's own ``tools`` and ``tool_choice`` (``Context.client_tools``) are OpenAI's contract: the turn
  offers **only the client's tools** (the model sees the tools of the request, as at OpenAI; the
  workspace's own tools are not offered, its documents are still retrieved), and a reply calling them
  comes back as ``tool_calls`` with ``finish_reason: "tool_calls"`` (streamed as ``delta.tool_calls`` with
  their ``index``). The server never runs a client's tool, and nothing of such a turn reaches approval.
  The client's calls and ``tool`` results after its last user message are the running turn, so its loop
  goes on (LangChain's ``bind_tools``, then the results, then the answer). A malformed, oversize or
  duplicate schema, too many tools, a ``tool_choice`` naming no tool sent, or a tool named like one of the
  workspace's is a 400 in OpenAI's shape. A prompted model (no native calls) reads the client's tools in
  its catalog; there ``tool_choice`` ``required`` or a name holds under the call grammar (the embedded
  llama.cpp server), and is only asked of an endpoint that takes none. A refusal that only the graph can
  make (a tool named like one of the workspace's, which may be an MCP server's) is a 400 for a request
  that is not streamed; a streamed one has had its 200 already and gets the error in the stream.
- ``POST /v1/embeddings``: the deployment's embedder, the one the workspace's documents are embedded with.

Every turn runs through the server these routes are mounted in, with the caller's own key (see
``http_common.py``), so the run rules and approvals hold as for any client. A tool that needs approval has
no one to ask in a stateless call: it is not run, and the answer names it and says why.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..checkpoints.members import WorkspaceUnknown
from ..core.client_tools import ClientTools, ResponseFormat
from ..core.context import Context, ContextError, explain
from ..core.conversation import message_text
from ..providers.embeddings import EmbeddingUnavailable
from ..providers.tokens import count, count_message, count_messages, ensure_tokenizer
from ..skills.documents import embedder
from .http_common import (
    RouteError,
    assistant_for,
    caller,
    check_message,
    read_json,
    refused_message,
    server_client,
    shared_assistant,
    shared_workspaces,
    workspace_assistants,
    workspace_of,
)

logger = logging.getLogger(__name__)

DEFAULT_WORKSPACE = "default"
#: The graph of a turn; also the id of its built-in assistant on both servers.
AGENT_GRAPH = "agent"
#: Metadata of the threads the stateless calls make, so one left behind (a crash) is recognised.
THREAD_MARK = {"via": "openai-api", "stateless": True}
MAX_EMBEDDING_INPUTS = 2048
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
#: Tasks that cancel and delete a turn's thread after its client went away; held so they are not collected.
_CLEANUPS: set[asyncio.Task[None]] = set()

Handler = Callable[[Request], Awaitable[Response]]


def error_response(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    """An error in OpenAI's shape, which its SDKs turn into the matching exception class."""
    kind = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error"}.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def _server_refusal(exc: httpx.HTTPStatusError) -> JSONResponse:
    """The server's own refusal (a run rule, a context error), passed on with its status and reason."""
    try:
        detail = exc.response.json().get("detail") or exc.response.text
    except ValueError:
        detail = exc.response.text
    return error_response(exc.response.status_code, str(detail), "refused_by_server")


def openai_errors(handler: Handler) -> Handler:
    """Render every refusal of a route in OpenAI's error shape, whoever raised it."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except RouteError as exc:
            return error_response(exc.status, exc.message, exc.code, exc.param)
        except httpx.HTTPStatusError as exc:
            return _server_refusal(exc)
        except Exception as exc:
            logger.exception("%s %s failed", request.method, request.url.path)
            return error_response(500, f"the request failed: {type(exc).__name__}", "internal_error")

    wrapped.__name__ = handler.__name__
    return wrapped


@dataclass
class Chat:
    """One ``chat/completions`` request, read and checked."""

    workspace: str
    messages: list[dict[str, Any]]
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    include_usage: bool = False
    #: The client's tools as ``Context.client_tools`` takes them; ``None`` when it sent none.
    client_tools: dict[str, Any] | None = None
    #: A JSON ``response_format`` as ``Context.response_format`` takes it; ``None`` for text.
    response_format: dict[str, Any] | None = None


def _content(message: dict[str, Any], index: int) -> str | list[dict[str, Any]]:
    """A message's content as the graph takes it: a string, or a list of content parts (text, images)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in content
    ):
        return content
    raise RouteError(
        400, f"messages[{index}].content must be a string or a list of content parts", "invalid_value"
    )


def _arguments(call: Any, where: str) -> dict[str, Any]:
    """A client's earlier call's arguments: OpenAI's JSON string (or an object), read into an object."""
    function = call.get("function") if isinstance(call, dict) else None
    raw = function.get("arguments", "{}") if isinstance(function, dict) else None
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise RouteError(
            400, f"{where}.function.arguments must be a JSON object", "invalid_value", "messages"
        )
    return args


def _client_call(call: Any, where: str) -> dict[str, Any]:
    """One of the client's earlier ``tool_calls`` as the graph's input takes it."""
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(call.get("id"), str) or not isinstance(name, str):
        raise RouteError(400, f"{where} needs an id and a function name", "invalid_value", "messages")
    return {"id": call["id"], "name": name, "args": _arguments(call, where)}


def _loop_message(message: dict[str, Any], index: int) -> dict[str, Any]:
    """A message of the client's tool loop after its last user message: its call, or a call's result."""
    where = f"messages[{index}]"
    content = _content(message, index)
    if message["role"] == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise RouteError(400, f"{where}.tool_call_id is required", "invalid_value", "messages")
        return {"role": "tool", "content": message_text({"content": content}), "tool_call_id": call_id}
    calls = message.get("tool_calls")
    if message["role"] != "assistant" or not isinstance(calls, list) or not calls:
        raise RouteError(
            400,
            f"{where}: after the last user message only the assistant's tool calls and their tool results "
            "may follow",
            "invalid_value",
            "messages",
        )
    turned = [_client_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)]
    return {"role": "assistant", "content": message_text({"content": content}), "tool_calls": turned}


def _conversation(raw: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The graph's input messages and the system prompt, from OpenAI's ``messages``.

    ``system`` (and ``developer``) messages become the turn's prompt. Before the last user message, tool
    calls and their results are left out, as the graph folds earlier turns to the user's message and the
    final answer anyway. After it may come the client's own tool loop (the assistant's calls of the
    client's tools and their ``tool`` results): they are the running turn, which the model reads to go
    on. A user's message with no text and no file (``null``, ``""``, ``[]``), or one the graph could not
    store, is refused here, naming it, rather than by the graph once the turn has begun.
    """
    if not isinstance(raw, list) or not raw:
        raise RouteError(400, "messages must be a non-empty list", "invalid_value")
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise RouteError(400, f"messages[{i}] needs a role, one of {', '.join(ROLES)}", "invalid_value")
    last_user = max((i for i, m in enumerate(raw) if m["role"] == "user"), default=-1)
    if last_user < 0:
        raise RouteError(
            400, "the last message (besides system messages) must be the user's", "invalid_value"
        )
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        role, content = message["role"], _content(message, i)
        if role == "user":
            check_message(content, f"messages[{i}].content")
        if role in ("system", "developer"):
            system.append(message_text({"content": content}))
        elif i > last_user:
            turns.append(_loop_message(message, i))
        elif role == "user" or (role == "assistant" and message_text({"content": content}).strip()):
            turns.append({"role": role, "content": content})
    return turns, "\n\n".join(system) if system else None


def _whole_number(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise RouteError(400, f"{name} must be a positive whole number", "invalid_value")
        return value
    return None


def _temperature(body: dict[str, Any]) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 2:
        raise RouteError(400, "temperature must be a number from 0 to 2", "invalid_value")
    return float(value)


#: Why the legacy ``functions`` are refused: ``tools`` carries the same, in the form every SDK sends now.
NO_FUNCTIONS = (
    "{param} is not supported: it is OpenAI's deprecated form of tools. Send the functions as tools "
    '([{{"type": "function", "function": {{...}}}}]) and tool_choice.'
)


def refuse_unsupported(body: dict[str, Any]) -> None:
    """Refuse, in OpenAI's error shape, options the turn cannot honour, rather than answer as if it had.

    A client that asks for several choices and gets one answer fails later and obscurely; a 400 naming the
    option tells it now.

    Raises:
        RouteError: 400 with ``param`` set to the option: ``n`` above 1, the legacy ``functions`` and
            ``function_call`` (``tools`` and ``tool_choice`` are honoured).
    """
    n = body.get("n")
    if n is not None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise RouteError(400, "n must be a positive whole number", "invalid_value", "n")
        if n > 1:
            raise RouteError(
                400,
                f"n={n} is not supported: a workspace's turn runs its agent once and gives one choice; "
                "send n=1 (or leave it out) and repeat the request for more answers",
                "unsupported_value",
                "n",
            )
    for param in ("functions", "function_call"):
        if body.get(param) not in (None, [], "none", "auto"):
            raise RouteError(400, NO_FUNCTIONS.format(param=param), "unsupported_parameter", param)


def _checked(model: type[BaseModel], value: dict[str, Any], param: str) -> dict[str, Any]:
    """``value`` as the run's context field ``model`` takes it, checked now: a wrong one is a 400."""
    try:
        return model.model_validate(value).model_dump(by_alias=True, exclude_none=True)
    except ValidationError as exc:
        raise RouteError(400, str(explain(exc, prefix=param)), "invalid_value", param) from None
    except ValueError as exc:
        raise RouteError(400, str(exc), "invalid_value", param) from None


def response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``response_format`` for the run's context; ``None`` for text or none.

    Raises:
        RouteError: 400 (``param`` ``response_format``) for a format that is not an object with a known
            type, or a ``json_schema`` whose schema is malformed or too large.
    """
    form = body.get("response_format")
    if form is None:
        return None
    kind = form.get("type") if isinstance(form, dict) else None
    if not isinstance(kind, str):
        raise RouteError(
            400, "response_format must be an object with a type", "invalid_value", "response_format"
        )
    if kind == "text":
        return None
    if kind not in ("json_object", "json_schema"):
        raise RouteError(
            400,
            f"response_format type {kind!r} is not supported: use text, json_object or json_schema",
            "unsupported_value",
            "response_format",
        )
    return _checked(ResponseFormat, form, "response_format")


def _tool_choice(raw: Any) -> str:
    """OpenAI's ``tool_choice`` (a word, or an object naming a function) as ``ClientTools.choice``."""
    if raw is None:
        return "auto"
    if isinstance(raw, str):
        return raw
    function = raw.get("function") if isinstance(raw, dict) and raw.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RouteError(
            400,
            'tool_choice must be auto, none, required or {"type": "function", "function": {"name": ...}}',
            "invalid_value",
            "tool_choice",
        )
    return name


def client_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``tools`` and ``tool_choice`` for the run's context; ``None`` when it sent no tools.

    Raises:
        RouteError: 400 naming ``tools`` or ``tool_choice``: an item that is not a function, a malformed,
            oversize or duplicate schema, too many tools, or a choice that names no tool sent.
    """
    tools, choice = body.get("tools"), _tool_choice(body.get("tool_choice"))
    if tools in (None, []):
        if choice not in ("auto", "none"):
            raise RouteError(400, f"tool_choice {choice!r} needs tools", "invalid_value", "tool_choice")
        return None
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
        for t in tools
    ):
        raise RouteError(
            400, 'tools must be a list of {"type": "function", "function": {...}}', "invalid_value", "tools"
        )
    value = {"functions": [t["function"] for t in tools], "choice": choice}
    param = "tool_choice" if choice not in ("auto", "none", "required") else "tools"
    if param == "tool_choice" and choice not in {t["function"].get("name") for t in tools}:
        raise RouteError(
            400, f"tool_choice names {choice!r}, which is not one of the tools sent", "invalid_value", param
        )
    return _checked(ClientTools, value, "tools")


def parse_chat(body: dict[str, Any]) -> Chat:
    """Read a ``chat/completions`` body: the workspace, the conversation and the options the graph honours.

    Raises:
        RouteError: 400 for a missing model, malformed messages, ill-typed options, or options the turn
            cannot honour (``refuse_unsupported``).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise RouteError(400, "model (the workspace slug) is required", "invalid_value")
    refuse_unsupported(body)
    messages, system = _conversation(body.get("messages"))
    options = body.get("stream_options")
    tools, form = client_tools(body), response_format(body)
    if tools is not None and form is not None:
        raise RouteError(
            400,
            "response_format with tools is not supported: a turn either hands the client's tool calls back "
            "or answers in the format asked for; send one of them",
            "unsupported_parameter",
            "response_format",
        )
    return Chat(
        client_tools=tools,
        response_format=form,
        workspace=model.strip(),
        messages=messages,
        system=system,
        max_tokens=_whole_number(body, "max_completion_tokens", "max_tokens"),
        temperature=_temperature(body),
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


async def resolve_assistant(client: LangGraphClient, workspace: str, user: str) -> Mapping[str, Any]:
    """The caller's assistant for a workspace; the agent's built-in one for ``default``.

    A workspace shared with the caller (``owner/slug``) is answered from its published settings, as its
    runs are (``http_common.shared_assistant``).

    Raises:
        RouteError: 404 when the caller has no such workspace and none of that name is shared with them
            (another user's is unknown to them too, in the same words).
    """
    unknown = RouteError(
        404, f"The model `{workspace}` does not exist or you do not have access to it.", "model_not_found"
    )
    try:
        shared = await shared_assistant(user, workspace)
    except WorkspaceUnknown:
        raise unknown from None
    found = shared or await assistant_for(client, workspace)
    if found is not None:
        return found
    if workspace == DEFAULT_WORKSPACE:
        return {"assistant_id": AGENT_GRAPH, "context": {}}
    raise unknown


async def check_settings(assistant: Mapping[str, Any], chat: Chat) -> None:
    """Refuse before any run what the graph would refuse at its first step: the turn's settings, merged.

    A ``max_tokens`` the model's window cannot hold is the client's mistake (400), not a failed turn. The
    window may depend on the model's files, so the check runs in a thread.

    Raises:
        RouteError: 400 naming the setting.
    """
    base = assistant.get("context") or (assistant.get("config") or {}).get("configurable") or {}
    try:
        await asyncio.to_thread(Context.from_mapping, {**base, **run_context(chat)})
    except ContextError as exc:
        param = "max_tokens" if "reply_reserve" in str(exc) else None
        raise RouteError(400, str(exc), "invalid_value", param) from None
    except ValueError:
        pass  # a field this version does not know: the server's own check decides


def run_context(chat: Chat) -> dict[str, Any]:
    """The turn's own settings: the workspace, the request's prompt, its reply limit and temperature.

    A stateless call has nobody to answer a question of the model, so ``ask_person`` is not offered.
    """
    context: dict[str, Any] = {"workspace": chat.workspace, "clarifying_questions": False}
    if chat.system is not None:
        context["system_prompt"] = chat.system
    if chat.max_tokens is not None:
        context["reply_reserve"] = context["max_tokens"] = chat.max_tokens
    if chat.temperature is not None:
        context["temperature"] = chat.temperature
    if chat.client_tools is not None:
        context["client_tools"] = chat.client_tools
    if chat.response_format is not None:
        context["response_format"] = chat.response_format
    return context


@dataclass
class Outcome:
    """What a finished (or stopped) turn left in its thread."""

    text: str
    finish_reason: str
    sources: list[dict[str, Any]]
    usage: dict[str, Any]
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: Calls of the client's own tools, in OpenAI's shape, handed back for the client to run.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def pending_note(requests: list[dict[str, Any]]) -> str:
    """The answer's words for tool calls left waiting for an approval no one can give here."""
    names = ", ".join(
        f"{r.get('name')} ({json.dumps(r.get('args', {}), ensure_ascii=False)})" for r in requests
    )
    return (
        f"Not run: {names} needs a person's approval in this workspace, and a stateless /v1 call has no one "
        "to ask. Nothing was done. Ask through a client that can approve (a LangGraph thread, Agent Chat UI, "
        "AnythingLLM's API), or have the workspace's owner allow the tool."
    )


def _interrupts(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pending approval requests of a thread's state (both servers put them on the tasks)."""
    found = [i for task in state.get("tasks") or [] for i in task.get("interrupts") or []]
    found += [i for i in state.get("interrupts") or [] if i not in found]
    values = [i.get("value") for i in found if isinstance(i, dict)]
    return [r for v in values if isinstance(v, dict) for r in v.get("action_requests") or []]


def _model_reply(message: Mapping[str, Any]) -> bool:
    """Whether a message is a model call's reply; an answer written by code (a refusal) has no metadata."""
    if message.get("type") != "ai":
        return False
    return bool(
        message.get("usage_metadata") or (message.get("response_metadata") or {}).get("finish_reason")
    )


def usage_of(messages: list[dict[str, Any]], start: int, chat: Chat) -> dict[str, Any]:
    """The tokens the model read and wrote in the turn: summed over its calls, as the model server reported.

    Each model call's reply carries the server's count in ``usage_metadata`` when the server sent one: always
    for a call that was not streamed, and for a streamed one only if the server counts unasked (llama.cpp
    does; OpenAI's does not). A call without it is estimated with the graph's tokenizer from the messages it
    followed (the workspace's prompt and tool schemas are not in the thread, so the estimate is low), and the
    usage says ``estimated: true``: a client billing or budgeting by it should know. A turn that never called
    the model (a refusal written by code) read and wrote nothing.

    Args:
        messages: The thread's messages after the run.
        start: The index of the turn's own (last) user message.
        chat: The request, whose system prompt the estimate counts.
    """
    prompt = completion = 0
    estimated = False
    for i in range(start + 1, len(messages)):
        message = messages[i]
        if not _model_reply(message):
            continue
        reported = message.get("usage_metadata")
        if reported:
            prompt += int(reported.get("input_tokens") or 0)
            completion += int(reported.get("output_tokens") or 0)
            continue
        estimated = True
        prompt += count(chat.system or "") + count_messages(messages[:i])
        completion += count_message(message)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if estimated:
        usage["estimated"] = True
    return usage


def outcome_of(state: Mapping[str, Any], chat: Chat) -> Outcome:
    """The answer, why it stopped, its sources and tokens, from the thread's state after the run."""
    values = state.get("values") or {}
    messages = values.get("messages") or []
    start = max((i for i, m in enumerate(messages) if m.get("type") == "human"), default=0)
    turn = messages[start + 1 :]
    last = next((m for m in reversed(turn) if m.get("type") == "ai"), None)
    text = message_text({"content": last.get("content", "")}) if last else ""
    pending = _interrupts(state)
    if pending:
        text = "\n\n".join(part for part in (text.strip(), pending_note(pending)) if part)
    stop = values.get("stop_reason")
    calls = client_calls(last) if stop == "tool_calls" and last else []
    finish = "tool_calls" if calls else "length" if stop == "max_tokens" and not pending else "stop"
    sources = values.get("sources") or []
    return Outcome(
        text,
        finish,
        sources if isinstance(sources, list) else [],
        usage_of(messages, start, chat),
        pending,
        calls,
    )


def client_calls(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A reply's calls of the client's tools in OpenAI's shape (``call_model`` kept only those)."""
    return [
        {
            "id": str(call.get("id") or ""),
            "type": "function",
            "function": {"name": call.get("name"), "arguments": json.dumps(call.get("args") or {})},
        }
        for call in reply.get("tool_calls") or []
    ]


@dataclass
class Turn:
    """One stateless turn: its thread on the server, its run, and the request that asked for it."""

    client: LangGraphClient
    assistant_id: str
    chat: Chat
    thread_id: str = ""
    run_id: str = ""
    done: bool = False

    async def open(self) -> None:
        """Make the turn's thread, marked as a stateless call's."""
        thread = await self.client.threads.create(metadata={**THREAD_MARK, "workspace": self.chat.workspace})
        self.thread_id = str(thread["thread_id"])

    async def tokens(self, streamed: bool = True) -> AsyncIterator[str]:
        """Run the turn, yielding the answer's text as the model writes it.

        Only text the model writes for the answer is yielded: tool-call chunks and other nodes' messages are
        not (``outcome`` supplies what the stream did not carry, such as a query-mode refusal).

        Args:
            streamed: Whether the client wants the text as it is written. If not, the run streams only its
                steps, so the graph calls the model without streaming and the model server's reply carries
                its own token counts, which a streamed call gets only when the graph asks for them.

        Raises:
            RouteError: 400 when the graph refused the request's message, 500 when the run failed otherwise.
        """
        run_input: dict[str, Any] = {"messages": self.chat.messages}
        parts = self.client.runs.stream(
            self.thread_id,
            self.assistant_id,
            input=run_input,
            context=run_context(self.chat),
            stream_mode="messages-tuple" if streamed else "updates",
            on_disconnect="cancel",
        )
        async for part in parts:
            if part.event == "metadata" and isinstance(part.data, dict):
                self.run_id = str(part.data.get("run_id") or "")
            elif part.event == "error":
                if (refused := refused_message(part.data)) is not None:
                    param = "tools" if refused.startswith("client tool") else "messages"
                    raise RouteError(400, refused, "invalid_value", param)
                detail = part.data.get("message") if isinstance(part.data, dict) else part.data
                raise RouteError(500, f"the turn failed: {detail}", "run_failed")
            elif part.event == "messages" and isinstance(part.data, list) and len(part.data) == 2:
                chunk, meta = part.data
                if (meta or {}).get("langgraph_node") != "call_model" or chunk.get("tool_call_chunks"):
                    continue
                text = message_text({"content": chunk.get("content", "")})
                if text and chunk.get("type") == "AIMessageChunk":
                    yield text
        self.done = True

    async def outcome(self) -> Outcome:
        """The finished turn's answer, read from its thread's state."""
        await ensure_tokenizer()  # loaded in a thread: the servers refuse blocking calls on their loop
        return outcome_of(await self.client.threads.get_state(self.thread_id), self.chat)

    async def close(self) -> None:
        """Stop the run if it is still going (its client left), then delete the thread.

        The exchange is in the chat log only if ``finish`` ran: a cancelled turn logged nothing. A stream
        whose connection closed may have been cancelled by the server already (``on_disconnect``), so a
        refused cancel is no failure; the thread is deleted once its run has stopped.
        """
        try:
            if not self.done and self.run_id:
                with contextlib.suppress(httpx.HTTPError):
                    await self.client.runs.cancel(self.thread_id, self.run_id, wait=True)
            if self.thread_id:
                await self._delete_thread()
        finally:
            await self.client.aclose()

    async def _delete_thread(self, attempts: int = 20) -> None:
        """Delete the turn's thread, waiting while its run still stops; one left behind keeps THREAD_MARK."""
        for _ in range(attempts):
            try:
                await self.client.threads.delete(self.thread_id)
                return
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 409:
                    return
            except httpx.HTTPError:
                return
            await asyncio.sleep(0.25)


def _close_later(turn: Turn) -> None:
    """Close a turn whose request was cancelled, in a task of its own that the cancellation cannot reach."""
    task = asyncio.create_task(turn.close())
    _CLEANUPS.add(task)
    task.add_done_callback(_CLEANUPS.discard)


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion_body(cid: str, chat: Chat, outcome: Outcome) -> dict[str, Any]:
    """A ``chat.completion`` object, with the turn's sources in an extra top-level ``sources`` field."""
    message: dict[str, Any] = {"role": "assistant", "content": outcome.text, "refusal": None}
    if outcome.tool_calls:
        message.update(content=outcome.text or None, tool_calls=outcome.tool_calls)
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": chat.workspace,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": outcome.finish_reason}
        ],
        "usage": outcome.usage,
        "sources": outcome.sources,
    }
    if outcome.pending:
        body["pending_approval"] = outcome.pending
    return body


def chunk_body(cid: str, chat: Chat, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A ``chat.completion.chunk`` object."""
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": chat.workspace,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _sse(body: dict[str, Any] | str) -> str:
    return f"data: {body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)}\n\n"


async def stream_completion(turn: Turn, cid: str) -> AsyncIterator[str]:
    """Server-sent events of a turn: a role chunk, text chunks, the finish chunk with sources, ``[DONE]``.

    If the client goes away the generator is cancelled: the run is then cancelled and its thread deleted.
    """
    chat, written = turn.chat, ""
    try:
        yield _sse(chunk_body(cid, chat, {"role": "assistant", "content": ""}))
        async for text in turn.tokens():
            written += text
            yield _sse(chunk_body(cid, chat, {"content": text}))
        outcome = await turn.outcome()
        rest = outcome.text[len(written) :] if outcome.text.startswith(written) else ""
        if rest:
            yield _sse(chunk_body(cid, chat, {"content": rest}))
        for index, call in enumerate(outcome.tool_calls):
            yield _sse(chunk_body(cid, chat, {"tool_calls": [{"index": index, **call}]}))
        last = {**chunk_body(cid, chat, {}, outcome.finish_reason), "sources": outcome.sources}
        if outcome.pending:
            last["pending_approval"] = outcome.pending
        yield _sse(last)
        if chat.include_usage:
            yield _sse({**chunk_body(cid, chat, {}), "choices": [], "usage": outcome.usage})
    except RouteError as exc:  # after the 200 went out: the error's body, in the stream
        yield _sse(json.loads(bytes(error_response(exc.status, exc.message, exc.code, exc.param).body)))
    except httpx.HTTPStatusError as exc:
        yield _sse(json.loads(bytes(_server_refusal(exc).body)))
    except BaseException:
        _close_later(turn)
        raise
    else:
        yield _sse("[DONE]")
    await turn.close()


def _key_refusal(request: Request) -> str:
    """Why a key was refused, naming the header the client sent it in (the SDKs send a Bearer token)."""
    given = request.headers.get("x-api-key")
    bearer = request.headers.get("authorization")
    if given:
        also = " (it is read before Authorization)" if bearer else ""
        return f"the API key sent in the x-api-key header is not valid{also}"
    if bearer and bearer.lower().startswith("bearer "):
        return "the API key sent in the Authorization header (Bearer) is not valid"
    if bearer:
        return "the Authorization header must be 'Bearer <key>'"
    return (
        "an API key is required: send it as 'Authorization: Bearer <key>' (as OpenAI's SDKs do) or x-api-key"
    )


async def authenticated(request: Request) -> str:
    """The caller (``http_common.caller``), with a 401 that names the header the key came in.

    The server's own refusal names ``x-api-key`` only, which misleads an OpenAI client: it sent a Bearer
    token and has no such header.

    Raises:
        RouteError: 401 for no key or a wrong one, 403 for the service identity.
    """
    try:
        return await caller(request)
    except RouteError as exc:
        if exc.status == 401:
            raise RouteError(401, _key_refusal(request), exc.code, exc.param) from None
        raise


@openai_errors
async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the caller's workspaces, each a model; one shared with them is ``owner/slug``."""
    user = await authenticated(request)
    client = server_client(request)
    try:
        slugs = {workspace_of(a) for a in await workspace_assistants(client)} | {DEFAULT_WORKSPACE}
    finally:
        await client.aclose()
    models = [{"id": s, "object": "model", "created": 0, "owned_by": user} for s in sorted(slugs)]
    models += [
        {"id": ref, "object": "model", "created": 0, "owned_by": ref.rpartition("/")[0]}
        for ref, _ in await shared_workspaces(user)
    ]
    return JSONResponse({"object": "list", "data": models})


@openai_errors
async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions``: one stateless turn of the workspace's agent."""
    user = await authenticated(request)
    chat = parse_chat(await read_json(request))
    client = server_client(request)
    turn = Turn(client, "", chat)
    try:
        assistant = await resolve_assistant(client, chat.workspace, user)
        await check_settings(assistant, chat)
        turn.assistant_id = str(assistant["assistant_id"])
        await turn.open()
    except BaseException:
        await turn.close()
        raise
    cid = _completion_id()
    if chat.stream:
        return StreamingResponse(stream_completion(turn, cid), media_type="text/event-stream")
    try:
        async for _ in turn.tokens(streamed=False):
            pass
        return JSONResponse(completion_body(cid, chat, await turn.outcome()))
    finally:
        await turn.close()


def _embedding_inputs(raw: Any) -> list[str]:
    """The texts to embed: a string or a list of strings (token arrays are not taken)."""
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise RouteError(400, "input must be a string or a non-empty list of strings", "invalid_value")
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise RouteError(400, f"input holds more than {MAX_EMBEDDING_INPUTS} texts", "invalid_value")
    return texts


def _encoded(vector: Any, encoding: str) -> list[float] | str:
    """A vector as OpenAI sends it: floats, or little-endian float32 in base64 (the SDKs' default)."""
    values = [float(v) for v in vector]
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
    return values


@openai_errors
async def embeddings(request: Request) -> Response:
    """``POST /v1/embeddings``: texts embedded by the model the workspace's documents are embedded with."""
    user = await authenticated(request)
    body = await read_json(request)
    workspace, texts = body.get("model"), _embedding_inputs(body.get("input"))
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise RouteError(400, "encoding_format must be float or base64", "invalid_value")
    if not isinstance(workspace, str) or not workspace:
        raise RouteError(400, "model (the workspace slug) is required", "invalid_value")
    client = server_client(request)
    try:
        await resolve_assistant(client, workspace, user)  # the caller's own or shared workspace, else 404
    finally:
        await client.aclose()
    try:
        model, _ = await embedder()
        vectors = await model.aembed_documents(texts)
    except EmbeddingUnavailable as exc:
        raise RouteError(503, str(exc), "embeddings_unavailable") from None
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(v, encoding)} for i, v in enumerate(vectors)
    ]
    await ensure_tokenizer()
    tokens = sum(count(t) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return JSONResponse({"object": "list", "data": data, "model": workspace, "usage": usage})


routes: list[BaseRoute] = [
    Route("/models", list_models, methods=["GET"]),
    Route("/chat/completions", chat_completions, methods=["POST"]),
    Route("/embeddings", embeddings, methods=["POST"]),
]
