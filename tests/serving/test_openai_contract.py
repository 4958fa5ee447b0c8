"""Issue 37, item 3: ``/v1`` keeps OpenAI's contract for what it accepts, or refuses in OpenAI's shape.

A ``response_format`` reaches the model (the scripted server records it) and the answer is the JSON; a
client's own ``tools`` come back as ``tool_calls`` for the client to run, and its next request with the
results gets the answer, while the workspace's own tools are neither offered nor run and nothing asks for
approval. ``n`` above 1 is still a 400 naming it, and so are malformed, oversize, clashing or unknown tools.
``usage`` is the model server's own count for the turn's model calls, and an estimate only where the
server reported none, flagged as one. A refused key is refused naming the header it came in. Driven by the
real ``openai`` SDK and LangChain's ``ChatOpenAI`` against the real dev server (and Aegra).
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph_sdk import get_client
from pydantic import BaseModel, SecretStr

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.serving.test_openai_api import make_workspace, sdk
from workspace_agent.core.context import QUERY_REFUSAL
from workspace_agent.samples.scripted_model import text_reply, tool_reply

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Capital(BaseModel):
    """The structured answer a client asks for."""

    city: str
    country: str


def langchain(url: str, workspace: str) -> ChatOpenAI:
    """LangChain's OpenAI client pointed at a workspace of alice's, as an app would use ``/v1``."""
    return ChatOpenAI(base_url=f"{url}/v1", api_key=SecretStr(KEYS["alice"]), model=workspace, max_retries=0)


def assert_refused(exc: openai.BadRequestError, param: str, says: str = "not supported") -> None:
    """A 400 in OpenAI's error shape, naming the option at fault and saying why."""
    assert exc.status_code == 400
    error = exc.body
    assert isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}, error
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert error["code"] and says in error["message"], error


async def test_n_and_legacy_functions_are_refused(secured_server, llm, workspace):  # noqa: F811
    """``n`` > 1 and the deprecated ``functions`` get OpenAI's 400 naming them; the model is not asked."""
    await make_workspace(secured_server, "alice", workspace)
    alice = sdk(secured_server, "alice")
    llm.reset()
    llm.push(*[text_reply("Paris.")] * 10)  # what a silent plain-text answer would have said

    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            await alice.chat.completions.create(model=workspace, messages=QUESTION, n=2, stream=stream)
        assert_refused(refused.value, "n")
    function = {"name": "lookup", "parameters": {"type": "object"}}
    with pytest.raises(openai.BadRequestError) as refused:
        await alice.chat.completions.create(model=workspace, messages=QUESTION, functions=[function])  # type: ignore[list-item]
    assert_refused(refused.value, "functions")

    # What is honoured still works: n=1, a text response_format, tool_choice "none" without tools.
    done = await alice.chat.completions.create(
        model=workspace, messages=QUESTION, n=1, response_format={"type": "text"}, tool_choice="none"
    )
    assert done.choices[0].message.content == "Paris."
    assert len(llm.requests) == 1, "no refused request reached the model"
    assert "response_format" not in llm.requests[0]


PARIS = '{"city": "Paris", "country": "France"}'


async def test_response_format_reaches_the_model(secured_server, llm, workspace):  # noqa: F811
    """json_schema and json_object are sent to the model as asked; the answer is the model's JSON."""
    await make_workspace(secured_server, "alice", workspace)
    alice = sdk(secured_server, "alice")
    schema = {"name": "Capital", "schema": Capital.model_json_schema(), "strict": True}
    llm.reset()
    llm.push(text_reply(PARIS))
    done = await alice.chat.completions.create(
        model=workspace, messages=QUESTION, response_format={"type": "json_schema", "json_schema": schema}
    )
    assert json.loads(done.choices[0].message.content or "") == {"city": "Paris", "country": "France"}
    assert done.choices[0].finish_reason == "stop"
    sent = llm.requests[-1]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": schema}
    assert "tools" not in sent, "no tool catalog beside a response_format"
    assert done.usage is not None and done.usage.total_tokens == 2  # the scripted server's own count

    for stream in (False, True):
        llm.push(text_reply(PARIS))
        if stream:
            chunks = await alice.chat.completions.create(
                model=workspace, messages=QUESTION, response_format={"type": "json_object"}, stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        else:
            done = await alice.chat.completions.create(
                model=workspace, messages=QUESTION, response_format={"type": "json_object"}
            )
            text = done.choices[0].message.content or ""
        assert json.loads(text)["city"] == "Paris"
        assert llm.requests[-1]["response_format"] == {"type": "json_object"}

    # LangChain: ChatOpenAI's default method is json_schema (response_format), the other is tool calling.
    chat = langchain(secured_server, workspace)
    llm.push(text_reply(PARIS))
    parsed = await chat.with_structured_output(Capital).ainvoke("What is the capital of France?")
    assert parsed == Capital(city="Paris", country="France")
    assert llm.requests[-1]["response_format"]["type"] == "json_schema"
    assert llm.requests[-1]["response_format"]["json_schema"]["name"] == "Capital"
    llm.push(tool_reply(("Capital", {"city": "Paris", "country": "France"})))
    by_call = chat.with_structured_output(Capital, method="function_calling")
    assert await by_call.ainvoke("What is the capital of France?") == Capital(city="Paris", country="France")
    sent = llm.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["Capital"]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "Capital"}}

    with pytest.raises(openai.BadRequestError) as refused:
        await alice.chat.completions.create(
            model=workspace,
            messages=QUESTION,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "string"}},
            },
        )
    assert_refused(refused.value, "response_format", "object")


@tool
def lookup_capital(country: str) -> str:
    """The capital city of a country."""
    raise AssertionError("the client's tool is run by the test, never by the server")


def server_tools_sent(request: dict) -> set[str]:
    """Names of the tools a model request offered."""
    return {t["function"]["name"] for t in request.get("tools") or []}


async def check_client_tools(url: str, llm, workspace: str) -> None:
    """LangChain's ``bind_tools`` loop through ``/v1``: the calls come back, the results go in, the answer."""
    await make_workspace(url, "alice", workspace)
    chat = langchain(url, workspace).bind_tools([lookup_capital])
    question = HumanMessage("What is the capital of France?")
    llm.reset()
    llm.push(tool_reply(("lookup_capital", {"country": "France"})))
    asked = await chat.ainvoke([question])
    assert isinstance(asked, AIMessage)
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [("lookup_capital", {"country": "France"})]
    assert asked.response_metadata["finish_reason"] == "tool_calls"
    assert server_tools_sent(llm.requests[-1]) == {"lookup_capital"}, "only the client's tools are offered"

    # Streamed: the calls arrive as tool_call_chunks, which LangChain adds up.
    llm.push(tool_reply(("lookup_capital", {"country": "France"})))
    total = None
    async for chunk in chat.astream([question]):
        total = chunk if total is None else total + chunk
    assert isinstance(total, AIMessageChunk) and total.tool_call_chunks
    assert [(c["name"], c["args"]) for c in total.tool_calls] == [("lookup_capital", {"country": "France"})]
    assert total.response_metadata["finish_reason"] == "tool_calls"

    # The client ran its tool and sends the result: the model reads it and answers.
    llm.push(text_reply("The capital of France is Paris."))
    result = ToolMessage("Paris", tool_call_id=asked.tool_calls[0]["id"])
    answer = await chat.ainvoke([question, asked, result])
    assert answer.content == "The capital of France is Paris."
    assert isinstance(answer, AIMessage) and answer.usage_metadata is not None
    assert answer.usage_metadata["total_tokens"] == 2, "the model's count, not the client's own messages"
    sent = llm.requests[-1]["messages"]
    assert sent[-1] == {"role": "tool", "content": "Paris", "tool_call_id": asked.tool_calls[0]["id"]}
    assert (
        sent[-2]["role"] == "assistant" and sent[-2]["tool_calls"][0]["function"]["name"] == "lookup_capital"
    )
    assert len(llm.requests) == 3 and not any("save_note" in server_tools_sent(r) for r in llm.requests)


async def test_client_tools_under_langgraph_dev(secured_server, llm, workspace):  # noqa: F811
    await check_client_tools(secured_server, llm, workspace)


async def test_client_tools_under_make_serve(keyed_served_url, llm, workspace):  # noqa: F811
    await check_client_tools(keyed_served_url, llm, workspace)


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_capital",
        "description": "The capital city of a country.",
        "parameters": {
            "type": "object",
            "properties": {"country": {"type": "string"}},
            "required": ["country"],
        },
    },
}


async def test_client_tool_calls_in_openai_shape(secured_server, llm, workspace):  # noqa: F811
    """The raw SDK: content null, finish_reason tool_calls, arguments as JSON text; streamed, indexed."""
    await make_workspace(secured_server, "alice", workspace)
    alice = sdk(secured_server, "alice")
    llm.reset()
    llm.push(tool_reply(("lookup_capital", {"country": "France"}), ("lookup_capital", {"country": "Peru"})))
    done = await alice.chat.completions.create(
        model=workspace,
        messages=QUESTION,
        tools=[LOOKUP],
        tool_choice="required",  # type: ignore[list-item]
    )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.type, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("function", "lookup_capital", {"country": "France"}),
        ("function", "lookup_capital", {"country": "Peru"}),
    ]
    assert llm.requests[-1]["tool_choice"] == "required"
    assert done.usage is not None and done.usage.total_tokens == 2
    assert "pending_approval" not in (done.model_extra or {})

    llm.push(tool_reply(("lookup_capital", {"country": "Peru"})))
    stream = await alice.chat.completions.create(
        model=workspace,
        messages=QUESTION,
        tools=[LOOKUP],
        stream=True,  # type: ignore[list-item]
    )
    chunks = [c async for c in stream]
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.type, d.function and d.function.name) for d in deltas] == [
        (0, "function", "lookup_capital")
    ]
    assert deltas[0].id
    assert json.loads(deltas[0].function.arguments or "") == {"country": "Peru"}  # type: ignore[union-attr]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"

    # The model names a tool of the workspace's, never offered here: nothing runs, nothing waits for approval.
    llm.push(tool_reply(("save_note", {"text": "buy milk"})))
    done = await alice.chat.completions.create(model=workspace, messages=QUESTION, tools=[LOOKUP])  # type: ignore[list-item]
    assert done.choices[0].finish_reason == "stop" and not done.choices[0].message.tool_calls
    assert "pending_approval" not in (done.model_extra or {})
    assert server_tools_sent(llm.requests[-1]) == {"lookup_capital"}


async def test_a_client_turn_runs_nothing_on_the_server(secured_server, llm, workspace):  # noqa: F811
    """A server tool's call in a client's turn is dropped: no approval, no execution, and decisions say so.

    Run as any LangGraph client would, with the run-context field ``client_tools``, so the thread's
    decisions can be read.
    """
    await make_workspace(secured_server, "alice", workspace)
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    thread = await client.threads.create()
    tools = {"functions": [LOOKUP["function"]], "choice": "auto"}
    llm.reset()
    llm.push(tool_reply(("save_note", {"text": "buy milk"}), ("lookup_capital", {"country": "France"})))
    out = await client.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "@agent save a note, then find France's capital"}]},
        context={"workspace": workspace, "client_tools": tools},
    )
    assert isinstance(out, dict)
    state = await client.threads.get_state(thread["thread_id"])
    assert not [i for t in state["tasks"] for i in t.get("interrupts") or []], "nothing asked for approval"
    decisions = out["decisions"]
    ids = [d["id"] for d in decisions]
    assert "D3" not in ids and out["stop_reason"] == "tool_calls"
    handed = [d["outcome"] for d in decisions if d["id"] == "C10"]
    last = out["messages"][-1]
    assert [c["name"] for c in last["tool_calls"]] == ["lookup_capital"]
    assert handed == [{"dropped": ["save_note"]}, {"to_client": [last["tool_calls"][0]["id"]]}]
    c0 = next(d for d in decisions if d["id"] == "C0")
    assert c0["outcome"] == {"client": ["lookup_capital"]}
    assert server_tools_sent(llm.requests[-1]) == {"lookup_capital"}
    assert len(llm.requests) == 1, "no second model call: the turn ended at finish"

    # An assistant cannot carry a client's tools: they are a run's.
    with pytest.raises(httpx.HTTPStatusError):
        await client.assistants.create("agent", context={"workspace": workspace, "client_tools": tools})
    # A run's ill-typed tools are refused before the graph runs.
    with pytest.raises(httpx.HTTPStatusError):
        await client.runs.wait(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "hi"}]},
            context={"workspace": workspace, "client_tools": {"functions": "lookup"}},
        )


async def test_client_tool_attacks_are_refused(secured_server, llm, workspace):  # noqa: F811
    """Clashing names, an unknown choice, huge or malformed schemas, too many tools: 400, model not asked."""
    await make_workspace(secured_server, "alice", workspace)
    alice = sdk(secured_server, "alice")
    llm.reset()

    def function(name: str = "lookup_capital", **parameters: object) -> dict:
        return {
            "type": "function",
            "function": {"name": name, "parameters": {"type": "object", **parameters}},
        }

    huge = {f"field_{i}": {"type": "string", "description": "x" * 200} for i in range(200)}
    cases = [
        ({"tools": [function("save_note")]}, "tools", "save_note"),
        (
            {"tools": [function()], "tool_choice": {"type": "function", "function": {"name": "rm"}}},
            "tool_choice",
            "rm",
        ),
        ({"tools": [function(properties=huge)]}, "tools", "limit"),
        ({"tools": [function(f"t{i}") for i in range(129)]}, "tools", "128"),
        ({"tools": [function(), function()]}, "tools", "unique"),
        (
            {"tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": "string"}}}]},
            "tools",
            "object",
        ),
        ({"tools": [function(name="has space")]}, "tools", "name"),
        ({"tools": ["lookup_capital"]}, "tools", "function"),
        ({"tool_choice": "required"}, "tool_choice", "needs tools"),
    ]
    for options, param, named in cases:
        with pytest.raises(openai.BadRequestError) as refused:
            await alice.chat.completions.create(model=workspace, messages=QUESTION, **options)  # type: ignore[arg-type]
        assert_refused(refused.value, param, named)

    # A tool result with no tools, or answering no call, cannot continue anything.
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_capital", "arguments": "{}"}}
    loop = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]}]
    orphan = [*QUESTION, {"role": "tool", "content": "Paris", "tool_call_id": "call_9"}]
    for messages, options in (
        ([*loop, {"role": "tool", "content": "Paris", "tool_call_id": "call_1"}], {}),
        (orphan, {"tools": [function()]}),
        (loop, {"tools": [function()]}),  # a call left without its result
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            await alice.chat.completions.create(model=workspace, messages=messages, **options)  # type: ignore[arg-type]
        assert refused.value.status_code == 400
    assert llm.requests == [], "no refused request reached the model"


async def check_usage(url: str, llm, workspace: str) -> None:
    """A turn's usage is the model server's count summed over its calls; an estimate is flagged as one."""
    await make_workspace(url, "alice", workspace)
    alice = sdk(url, "alice")
    llm.reset()
    llm.push({**text_reply("Paris."), "usage": {"prompt_tokens": 838, "completion_tokens": 3}})
    done = await alice.chat.completions.create(model=workspace, messages=QUESTION)
    assert done.choices[0].message.content == "Paris."
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (838, 3, 841)
    assert not (done.usage.model_extra or {}).get("estimated")
    assert [r.get("stream", False) for r in llm.requests] == [False], "the model was asked without streaming"

    # A turn with a tool call: two model calls, each counted by the server, summed.
    llm.reset()
    llm.push(
        {**tool_reply(("current_datetime", {})), "usage": {"prompt_tokens": 900, "completion_tokens": 12}},
        {**text_reply("It is now."), "usage": {"prompt_tokens": 950, "completion_tokens": 4}},
    )
    done = await alice.chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": "@agent what time is it?"}]
    )
    assert done.choices[0].message.content == "It is now." and len(llm.requests) == 2
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (1850, 16)

    # LangChain reads the same numbers.
    llm.push({**text_reply("Paris."), "usage": {"prompt_tokens": 640, "completion_tokens": 2}})
    reply = await langchain(url, workspace).ainvoke("What is the capital of France?")
    assert reply.usage_metadata is not None
    assert (reply.usage_metadata["input_tokens"], reply.usage_metadata["output_tokens"]) == (640, 2)

    # Streamed, the graph's model call asks the server to count too (stream_options.include_usage).
    llm.push({**text_reply("Paris, streamed."), "usage": {"prompt_tokens": 700, "completion_tokens": 5}})
    stream = await alice.chat.completions.create(
        model=workspace, messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (700, 5)
    assert not (usage.model_extra or {}).get("estimated")


async def test_usage_under_langgraph_dev(secured_server, llm, workspace):  # noqa: F811
    await check_usage(secured_server, llm, workspace)


async def test_usage_under_make_serve(keyed_served_url, llm, workspace):  # noqa: F811
    """Aegra, too, runs a non-streamed request's model call unstreamed, so the server's count comes back."""
    await check_usage(keyed_served_url, llm, workspace)


async def test_refused_key_names_its_header(secured_server):  # noqa: F811
    """The 401 names the header the client used: an OpenAI SDK sends ``Authorization: Bearer``."""
    with pytest.raises(openai.AuthenticationError) as refused:
        await sdk(secured_server, key="wrong-key").models.list()
    message = refused.value.body["message"]  # type: ignore[index]
    assert "Authorization" in message and "x-api-key" not in message, message
    cases = {
        "x-api-key": {"x-api-key": "wrong-key"},
        "Authorization": {"Authorization": "Bearer wrong-key"},
        "Bearer": {"Authorization": "wrong-key"},
    }
    for named, headers in cases.items():
        response = httpx.get(f"{secured_server}/v1/models", headers=headers, timeout=10)
        assert response.status_code == 401 and named in response.json()["error"]["message"], response.text
    none = httpx.get(f"{secured_server}/v1/models", timeout=10).json()["error"]["message"]
    assert "Authorization" in none and "x-api-key" in none, none


async def test_a_prompted_model_reads_the_clients_tools_in_its_catalog(secured_server, llm, workspace):  # noqa: F811
    """A model without native calls (the embedded one's path) is told of the client's tools in its prompt.

    Its JSON naming one is read as a call and handed back like a native one; no ``tools`` parameter is sent.
    """
    await make_workspace(secured_server, "alice", workspace)
    client = get_client(url=secured_server, api_key=KEYS["alice"])
    thread = await client.threads.create()
    llm.reset()
    llm.push(text_reply('{"name": "lookup_capital", "arguments": {"country": "France"}}'))
    out = await client.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "What is the capital of France?"}]},
        context={
            "workspace": workspace,
            "native_tool_calling": False,
            "client_tools": {"functions": [LOOKUP["function"]]},
        },
    )
    assert isinstance(out, dict) and out["stop_reason"] == "tool_calls"
    last = out["messages"][-1]
    assert [(c["name"], c["args"]) for c in last["tool_calls"]] == [("lookup_capital", {"country": "France"})]
    sent = llm.requests[-1]
    assert "tools" not in sent and "lookup_capital" in sent["messages"][0]["content"]
    assert "save_note" not in sent["messages"][0]["content"], "no tool of the workspace's is described"


async def test_a_query_workspace_still_refuses_without_documents(secured_server, llm, workspace):  # noqa: F811
    """A client's tools do not turn a query workspace (answers only from its documents) into an agent."""
    await make_workspace(secured_server, "alice", workspace, chat_mode="query")
    llm.reset()
    done = await sdk(secured_server, "alice").chat.completions.create(
        model=workspace,
        messages=QUESTION,
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    assert done.choices[0].message.content == QUERY_REFUSAL and not done.choices[0].message.tool_calls
    assert llm.requests == [], "the model was not asked"
