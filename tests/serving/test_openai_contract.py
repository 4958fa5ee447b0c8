"""Issue 37, item 3: ``/v1`` keeps OpenAI's contract for what it accepts, or refuses in OpenAI's shape.

A client sending ``n``, ``response_format`` or its own ``tools`` used to get one plain-text answer and fail
later (LangChain's ``with_structured_output`` with "Invalid json output"); it now gets a 400 naming the
option, before anything reaches the model. ``usage`` is the model server's own count for the turn's model
calls, and an estimate only where the server reported none, flagged as one. A refused key is refused naming
the header it came in. Driven by the real ``openai`` SDK and LangChain's ``ChatOpenAI``.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.serving.test_openai_api import make_workspace, sdk
from workspace_agent.samples.scripted_model import text_reply, tool_reply

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Capital(BaseModel):
    """The structured answer a client asks for."""

    city: str
    country: str


def langchain(url: str, workspace: str) -> ChatOpenAI:
    """LangChain's OpenAI client pointed at a workspace of alice's, as an app would use ``/v1``."""
    return ChatOpenAI(base_url=f"{url}/v1", api_key=SecretStr(KEYS["alice"]), model=workspace, max_retries=0)


def assert_refused(exc: openai.BadRequestError, param: str) -> None:
    """A 400 in OpenAI's error shape, naming the option at fault."""
    assert exc.status_code == 400
    error = exc.body
    assert isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}, error
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["code"] and param in error["message"] and "not supported" in error["message"]


async def test_unsupported_options_are_refused(secured_server, llm, workspace):  # noqa: F811
    """``n`` > 1, a JSON ``response_format`` and client ``tools`` get OpenAI's 400; the model is not asked."""
    await make_workspace(secured_server, "alice", workspace)
    alice = sdk(secured_server, "alice")
    llm.reset()
    llm.push(*[text_reply("Paris.")] * 10)  # what a silent plain-text answer would have said

    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            await alice.chat.completions.create(model=workspace, messages=QUESTION, n=2, stream=stream)
        assert_refused(refused.value, "n")
    with pytest.raises(openai.BadRequestError) as refused:
        await alice.chat.completions.create(
            model=workspace, messages=QUESTION, response_format={"type": "json_object"}
        )
    assert_refused(refused.value, "response_format")
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        await alice.chat.completions.create(model=workspace, messages=QUESTION, tools=[tool])  # type: ignore[list-item]
    assert_refused(refused.value, "tools")

    chat = langchain(secured_server, workspace)
    for method in ("json_schema", "function_calling", "json_mode"):
        structured = chat.with_structured_output(Capital, method=method)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError) as refused:  # never "Invalid json output"
            await structured.ainvoke("What is the capital of France?")
        assert_refused(refused.value, "tools" if method == "function_calling" else "response_format")
    with pytest.raises(openai.BadRequestError) as refused:
        await chat.bind_tools([Capital]).ainvoke("What is the capital of France?")
    assert_refused(refused.value, "tools")

    # What is honoured still works: n=1, a text response_format, tool_choice "none" without tools.
    done = await alice.chat.completions.create(
        model=workspace, messages=QUESTION, n=1, response_format={"type": "text"}, tool_choice="none"
    )
    assert done.choices[0].message.content == "Paris."
    assert len(llm.requests) == 1, "no refused request reached the model"


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
