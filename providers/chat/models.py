"""The chat model: any OpenAI-compatible endpoint through ``ChatOpenAI``, faults named by their endpoint.

One client per endpoint and model is kept, so its HTTP connection pool is reused across turns — per event
loop, because the async HTTP client belongs to the loop that first used it. Where the endpoint is and what
the model can do are the ``ModelSettings`` the caller resolved (``Services.settings`` for the graphs); a
client keeps them, so its faults are explained with the settings it was made with.

A model call that fails because of the endpoint — nothing listening, a hang past ``MODEL_TIMEOUT``, a body
that is not a chat completion, no ``choices`` — raises ``ModelEndpointError``, whose message names the
endpoint and the setting to change. That message is what a person sees in their client (the CLI, Studio,
Agent Chat UI, an SDK run's error); the failed call left nothing behind, so the next turn works once the
endpoint does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr, SecretStr

from ...core.settings import ModelSettings, model_settings
from .endpoint import endpoint_url
from .loops import loop_local

_FAULTS = (openai.OpenAIError, ValueError, TypeError, KeyError, IndexError, AttributeError)


def _carries_reply(chunk: ChatGenerationChunk) -> bool:
    """Whether a streamed chunk is part of an answer (a chunk made of no ``choices`` is not)."""
    message: Any = chunk.message
    finished = (chunk.generation_info or {}).get("finish_reason")
    return bool(message.content or message.tool_call_chunks or finished)


class ModelEndpointError(RuntimeError):
    """The model endpoint could not give an answer; the message says which endpoint and what to change."""


def describe_fault(exc: BaseException, url: str, settings: ModelSettings) -> str:
    """A person's explanation of an endpoint fault: what happened, where, and which setting to change."""
    where = f"the model endpoint {url}"
    if settings.kind == "local":
        where = f"the embedded local model at {url}"
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"{where} did not answer within {settings.timeout:g} s; set MODEL_TIMEOUT to wait longer, "
            f"or {settings.setting} to another server"
        )
    if isinstance(exc, openai.APIConnectionError):
        return f"{where} cannot be reached ({exc.__cause__ or exc}); start it, or set {settings.setting}"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return f"{where} refused the key ({exc.status_code}); set OPENAI_API_KEY"
    if isinstance(exc, openai.NotFoundError):
        return f"{where} has no model {settings.model!r} or no chat API ({exc.status_code}); set CHAT_MODEL"
    if isinstance(exc, openai.APIStatusError):
        return f"{where} failed with HTTP {exc.status_code}: {exc.message}"
    return (
        f"{where} sent a reply that is not an OpenAI chat completion ({type(exc).__name__}: {exc}); "
        f"check that {settings.setting} names an OpenAI-compatible /v1 endpoint"
    )


class EndpointChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` that turns endpoint faults into ``ModelEndpointError`` naming the endpoint."""

    _settings: ModelSettings | None = PrivateAttr(default=None)

    def with_settings(self, settings: ModelSettings) -> EndpointChatOpenAI:
        """Tell the client the settings it was made with, so that its fault messages name them."""
        self._settings = settings
        return self

    @property
    def settings(self) -> ModelSettings:
        """The settings this client was made with (``with_settings``)."""
        if self._settings is None:
            raise RuntimeError("an endpoint client is made by chat_model, which gives it its settings")
        return self._settings

    def _fault(self, exc: BaseException) -> ModelEndpointError:
        settings = self.settings
        if settings.kind == "local":
            from ..local.model_server import forget_shared_model

            forget_shared_model()  # a dead server is looked for (and restarted) on the next turn
        return ModelEndpointError(describe_fault(exc, str(self.openai_api_base), settings))

    def _checked(self, result: ChatResult) -> ChatResult:
        if not result.generations:
            raise ValueError("the reply has no choices")
        return result

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return self._checked(super()._generate(messages, stop, run_manager, **kwargs))
        except _FAULTS as exc:
            raise self._fault(exc) from exc

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return self._checked(await super()._agenerate(messages, stop, run_manager, **kwargs))
        except _FAULTS as exc:
            raise self._fault(exc) from exc

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        seen = False
        try:
            for chunk in super()._stream(*args, **kwargs):
                seen = seen or _carries_reply(chunk)
                yield chunk
        except _FAULTS as exc:
            raise self._fault(exc) from exc
        if not seen:
            raise self._fault(ValueError("the streamed reply has no choices"))

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        seen = False
        try:
            async for chunk in super()._astream(*args, **kwargs):
                seen = seen or _carries_reply(chunk)
                yield chunk
        except _FAULTS as exc:
            raise self._fault(exc) from exc
        if not seen:
            raise self._fault(ValueError("the streamed reply has no choices"))


def _client(url: str, settings: ModelSettings, name: str) -> EndpointChatOpenAI:
    return loop_local(
        ("chat", url, settings, name),
        lambda: EndpointChatOpenAI(
            base_url=url,
            api_key=SecretStr(settings.api_key),
            model=name,
            temperature=0,
            # a streamed reply ends with the tokens the server counted (stream_options.include_usage), so a
            # turn's usage is the model's own count on every path, streamed or not
            stream_usage=True,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
            # the same bound on the wait for a streamed token: the first waits while the prompt is read
            stream_chunk_timeout=settings.timeout,
            # langchain-openai otherwise shares one async HTTP client per URL across every loop of the
            # process, and a connection opened in one loop fails in another (sync callers run on their own).
            http_async_client=openai.DefaultAsyncHttpxClient(timeout=settings.timeout),
        ).with_settings(settings),
    )


def _local_url() -> tuple[str, str]:
    """The local model server's URL and the key it takes (started if none is live)."""
    try:
        from ..local.model_server import shared_model_server

        server = shared_model_server()
        return server.base_url, server.chat_openai_kwargs()["api_key"]
    except Exception as exc:  # the local model could not be started: say so where the person looks
        raise ModelEndpointError(
            f"the embedded local model could not be started ({exc}); set OPENAI_BASE_URL to use another "
            "OpenAI-compatible endpoint"
        ) from exc


class LocalChatOpenAI(EndpointChatOpenAI):
    """The embedded local model: each call finds its shared server, starting it on first use.

    Finding it reads a file and may start a process, so under an event loop (the dev server's, which
    refuses blocking calls) that happens in a worker thread; the call then goes to the client of the
    server's URL. Nodes hold this object without knowing whether a server is up yet.
    """

    def _inner(self, server: tuple[str, str]) -> EndpointChatOpenAI:
        url, key = server
        return _client(url, replace(self.settings, api_key=key), self.model_name)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return self._inner(_local_url())._generate(messages, *args, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        url = await asyncio.to_thread(_local_url)
        return await self._inner(url)._agenerate(messages, *args, **kwargs)

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        yield from self._inner(_local_url())._stream(*args, **kwargs)

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        url = await asyncio.to_thread(_local_url)
        async for chunk in self._inner(url)._astream(*args, **kwargs):
            yield chunk


def chat_model(model: str | None = None, settings: ModelSettings | None = None) -> ChatOpenAI:
    """The client for ``model`` (default: the settings' model) at the settings' endpoint.

    Building it does no I/O: for the local model, the server is found (or started) at the first call.

    Args:
        model: The model's name at the endpoint; the settings' model unless given.
        settings: Where the endpoint is and how long to wait; a graph passes its own (``Services``). A
            program or script that has none gets the environment's, resolved now.
    """
    if settings is None:
        settings = model_settings()
    name = model or settings.model
    if settings.kind == "endpoint":
        return _client(endpoint_url(settings), settings, name)
    return loop_local(
        ("local-chat", name, settings),
        lambda: LocalChatOpenAI(
            model=name, api_key=SecretStr("local"), base_url="http://local-model.invalid/v1"
        ).with_settings(settings),
    )
