"""A scripted OpenAI-compatible HTTP server.

It lets tests and demos drive the real ``ChatOpenAI`` client path — HTTP, streaming chunks, tool-call
deltas, ``finish_reason`` — with replies that are decided in advance, and it records every request so a test
can assert what the model was actually sent. It is not a model: the main job uses it only when no model is
configured, and says so.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
Rule = Callable[[dict[str, Any]], Reply]


def text_reply(text: str, finish_reason: str = "stop") -> Reply:
    """A plain text answer."""
    return {"content": text, "finish_reason": finish_reason}


def tool_reply(
    *calls: tuple[str, dict[str, Any] | str], content: str = "", finish_reason: str = "tool_calls"
) -> Reply:
    """An answer asking for tool calls; string arguments are sent verbatim (for malformed-JSON cases)."""
    return {
        "content": content,
        "tool_calls": [{"id": f"call_{uuid.uuid4().hex[:12]}", "name": n, "arguments": a} for n, a in calls],
        "finish_reason": finish_reason,
    }


def meant_for(text: str, reply: Reply) -> Reply:
    """``reply``, taken only by a request whose last user message is ``text``."""
    return {**reply, "to": text}


def hashed_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words embedding: texts sharing words are close, others nearly orthogonal."""
    vec = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        h = int(hashlib.md5(word.encode()).hexdigest(), 16)
        vec[h % dim] += 1.0 if (h >> 8) % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message of a chat request."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
            return str(content or "")
    return ""


def echo_rule(request: dict[str, Any]) -> Reply:
    """The demo behaviour: the clock, a document search, or an echo of the question, by its words."""
    messages = request.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return text_reply(f"The tool answered: {messages[-1].get('content')}")
    question = last_user_text(request)
    tools = {t["function"]["name"] for t in request.get("tools", [])}
    if "current_datetime" in tools and re.search(r"\b(time|date|today)\b", question.lower()):
        return tool_reply(("current_datetime", {}))
    if "search_documents" in tools and re.search(r"\b(docs?|documents?)\b", question.lower()):
        return tool_reply(("search_documents", {"query": question}))
    return text_reply(f"(scripted model) You said: {question}")


@dataclass
class ScriptedLLM:
    """An OpenAI-compatible server on loopback whose replies come from a script.

    Replies are taken from ``script`` in order; when it is empty, ``rule`` decides from the request. A reply
    may carry ``delay`` (seconds before answering; a long one is a hung model), ``logprobs`` (the tokens
    with their alternatives, as a non-streamed reply gives them), ``status`` (an HTTP error code to fail
    with), ``fault`` (``garbage`` or ``empty_choices``: a broken endpoint) and ``usage`` (the
    ``prompt_tokens`` and ``completion_tokens`` the server reports for it; 1 and 1 unless given). Usage goes
    in every non-streamed reply and, as OpenAI's does, in a last chunk of a stream only when the request
    asks for it (``stream_options.include_usage``).
    """

    script: list[Reply] = field(default_factory=list)
    rule: Rule = echo_rule
    embed: Callable[[str], list[float]] = hashed_embedding
    requests: list[dict[str, Any]] = field(default_factory=list)
    embedding_requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """The ``/v1`` URL to give ``ChatOpenAI(base_url=...)``."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str), "a bound AF_INET socket names its host as text"
        return f"http://{host}:{port}/v1"

    def start(self, port: int = 0) -> ScriptedLLM:
        """Listen on loopback in a daemon thread."""
        server = _QuietServer(("127.0.0.1", port), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="scripted-llm").start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def push(self, *replies: Reply) -> None:
        """Queue replies for the next requests."""
        with self._lock:
            self.script.extend(replies)

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.embedding_requests.clear()

    def next_reply(self, request: dict[str, Any]) -> Reply:
        """Record the request and pick its reply: the first queued one meant for it, else the rule's.

        A reply queued with ``to=TEXT`` (see ``meant_for``) is taken only by a request whose last user message
        is ``TEXT``, so a request from elsewhere on the same server (a run an earlier test left behind) cannot
        take a test's scripted answer.
        """
        with self._lock:
            self.requests.append(request)
            for i, reply in enumerate(self.script):
                if "to" not in reply or reply["to"] == last_user_text(request):
                    return self.script.pop(i)
        return self.rule(request)


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-request (a run cancelled, a test over) is not worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or None}
    if reply.get("tool_calls"):
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": _args(c)}}
            for c in reply["tool_calls"]
        ]
    choice = {"index": 0, "message": message, "finish_reason": reply.get("finish_reason", "stop")}
    if reply.get("logprobs"):
        choice["logprobs"] = {"content": reply["logprobs"]}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(reply),
    }


def _usage(reply: Reply) -> dict[str, int]:
    """The token counts the server reports for a reply: the reply's own ``usage``, else 1 and 1."""
    given = reply.get("usage") or {}
    prompt, completion = int(given.get("prompt_tokens", 1)), int(given.get("completion_tokens", 1))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _args(call: dict[str, Any]) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = reply.get("content") or ""
    tokens = reply.get("logprobs") or []
    if tokens and "".join(t["token"] for t in tokens) == text:  # llama.cpp streams each token's alternatives
        deltas += [{"content": t["token"], "logprobs": {"content": [t]}} for t in tokens]
    else:
        deltas += [{"content": piece} for piece in re.findall(r"\S+\s*|\s+", text)]
    for i, call in enumerate(reply.get("tool_calls") or []):
        args = _args(call)
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                ]
            }
        )
        for start in range(0, len(args), 8):
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[start : start + 8]}}]})
    chunks = [
        {
            **base,
            "choices": [{"index": 0, "logprobs": d.pop("logprobs", None), "delta": d, "finish_reason": None}],
        }
        for d in deltas
    ]
    chunks.append(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.get("finish_reason", "stop")}]}
    )
    return chunks


def _handler_for(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def setup(self) -> None:
            super().setup()
            # Headers and body go out as separate writes; without this, Nagle's algorithm meets the
            # client's delayed ACK and every request waits about 40 ms on loopback.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _send_json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_fault(self, fault: str, stream: bool) -> None:
            """A broken endpoint: ``garbage`` (a body that is no completion) or ``empty_choices``."""
            if fault == "garbage":
                data = b"<html><body>502 Bad Gateway (not JSON)</body></html>"
                kind = "text/event-stream" if stream else "application/json"
            elif stream:
                chunk = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "choices": []}
                data, kind = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(), "text/event-stream"
            else:
                empty = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "choices": []}
                data, kind = json.dumps(empty | {"model": "x"}).encode(), "application/json"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path.endswith("/embeddings"):
                llm.embedding_requests.append(request)
                inputs = request.get("input")
                inputs = [inputs] if isinstance(inputs, str) else inputs
                data = [
                    {"object": "embedding", "index": i, "embedding": llm.embed(str(t))}
                    for i, t in enumerate(inputs)
                ]
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": request.get("model", ""),
                        "usage": {"prompt_tokens": 0, "total_tokens": 0},
                    },
                )
                return
            reply = llm.next_reply(request)
            if reply.get("delay"):
                time.sleep(float(reply["delay"]))
            if reply.get("fault"):
                self._send_fault(reply["fault"], bool(request.get("stream")))
                return
            if reply.get("status"):
                self._send_json(
                    int(reply["status"]),
                    {
                        "error": {
                            "message": reply.get("content") or "scripted failure",
                            "type": "server_error",
                        }
                    },
                )
                return
            model = request.get("model", "scripted")
            if not request.get("stream"):
                self._send_json(200, _completion(reply, model))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            chunks = _chunks(reply, model)
            if (request.get("stream_options") or {}).get("include_usage"):
                chunks.append({**chunks[-1], "choices": [], "usage": _usage(reply)})
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main() -> None:
    """Run the scripted server alone (``python -m workspace_agent.samples.scripted_model --port N``)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    llm = ScriptedLLM().start(port)
    print(llm.base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
