"""Item 4: identity comes from authentication, not from context; each user reaches only their own threads.

Run against a ``langgraph dev`` holding two API keys (alice's and bob's), through ``langgraph_sdk`` as a
remote client would. On the code before authentication every one of these requests succeeded.
"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from tests.security.conftest import KEYS
from tests.serving.conftest import serve, serving_env  # noqa: F401 - fixtures of the Aegra tests
from tests.serving.test_serve_memory import marked_by_user, memory_rule, quiet_crons, seed
from workspace_agent.samples.scripted_model import text_reply, tool_reply


def as_user(url: str, name: str):
    return get_client(url=url, api_key=KEYS[name])


def status_of(exc: BaseException) -> int:
    return exc.response.status_code  # type: ignore[attr-defined]


def system_prompt_of(request: dict) -> str:
    return request["messages"][0]["content"]


async def alice_thread_waiting(url: str, llm, workspace: str) -> tuple[str, dict]:
    """A thread of alice's stopped at an approval of save_note."""
    alice = as_user(url, "alice")
    thread = await alice.threads.create()
    llm.push(tool_reply(("save_note", {"text": "alice's secret"})))
    await alice.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "note it"}]},
        context={"workspace": workspace},
    )
    state = await alice.threads.get_state(thread["thread_id"])
    assert state["next"] == ["approve"]
    return thread["thread_id"], state


def test_no_key_or_a_wrong_key_is_401(secured_server):
    for headers in (
        {},
        {"x-api-key": "guess"},
        {"Authorization": "Bearer guess"},
        {"x-auth-scheme": "langsmith"},
    ):
        response = httpx.post(f"{secured_server}/threads/search", json={}, headers=headers, timeout=10)
        assert response.status_code == 401, (headers, response.text)
    ok = httpx.post(
        f"{secured_server}/threads/search", json={}, headers={"x-api-key": KEYS["bob"]}, timeout=10
    )
    assert ok.status_code == 200


async def test_bob_cannot_read_search_or_resume_alices_thread(secured_server, llm, workspace):
    thread_id, _ = await alice_thread_waiting(secured_server, llm, workspace)
    bob = as_user(secured_server, "bob")
    with pytest.raises(NotFoundError):
        await bob.threads.get(thread_id)
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.threads.get_state(thread_id)
    assert status_of(failed.value) in (403, 404)
    with pytest.raises(httpx.HTTPStatusError):
        await bob.threads.get_history(thread_id)
    assert thread_id not in [t["thread_id"] for t in await bob.threads.search(limit=100)]
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.runs.wait(thread_id, "agent", command={"resume": {"decisions": [{"type": "approve"}]}})
    assert status_of(failed.value) in (403, 404)

    alice = as_user(secured_server, "alice")
    state = await alice.threads.get_state(thread_id)
    assert state["next"] == ["approve"], "bob's attempts changed nothing: alice's approval is still pending"
    assert thread_id in [t["thread_id"] for t in await alice.threads.search(limit=100)]


async def test_bob_cannot_pose_as_alice_through_context(secured_server, llm, workspace):
    bob = as_user(secured_server, "bob")
    thread = await bob.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.runs.wait(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "hi"}]},
            context={"workspace": workspace, "user_id": "alice"},
        )
    assert status_of(failed.value) == 403 and "authenticated user" in failed.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.runs.wait(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "hi"}]},
            config={"configurable": {"workspace": workspace, "user_id": "alice"}},
        )
    assert status_of(failed.value) == 403
    assert llm.requests == [], "the model was never called for a refused run"

    llm.push(text_reply("hello"))
    await bob.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "hi"}]},
        context={"workspace": workspace, "chat_mode": "chat", "system_prompt": "You serve {user_id}."},
    )
    assert system_prompt_of(llm.requests[-1]).startswith("You serve bob.")


async def test_bob_cannot_plant_a_thread_in_alices_list(secured_server):
    alice, bob = as_user(secured_server, "alice"), as_user(secured_server, "bob")
    planted = await bob.threads.create(metadata={"owner": "alice"})
    await bob.threads.update(planted["thread_id"], metadata={"owner": "alice", "title": "from bob"})
    assert planted["thread_id"] not in [t["thread_id"] for t in await alice.threads.search(limit=100)]
    assert (await bob.threads.get(planted["thread_id"]))["metadata"]["owner"] == "bob"


async def test_an_assistant_is_its_owners(secured_server, llm, workspace):
    alice, bob = as_user(secured_server, "alice"), as_user(secured_server, "bob")
    mine = await alice.assistants.create("agent", context={"workspace": workspace}, name=workspace)
    with pytest.raises(httpx.HTTPStatusError):
        await bob.assistants.update(
            mine["assistant_id"], context={"workspace": workspace, "auto_approved": ["*"]}
        )
    assert mine["assistant_id"] not in [a["assistant_id"] for a in await bob.assistants.search(limit=100)]
    thread = await bob.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.runs.wait(
            thread["thread_id"], mine["assistant_id"], input={"messages": [{"role": "user", "content": "x"}]}
        )
    assert status_of(failed.value) in (403, 404)
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await bob.assistants.create("agent", context={"workspace": workspace, "user_id": "alice"})
    assert status_of(failed.value) == 403
    assert (await alice.assistants.get(mine["assistant_id"]))["context"]["workspace"] == workspace
    assert llm.requests == []


async def test_without_keys_the_context_names_the_user_as_before(dev_server, llm, workspace):
    client = get_client(url=dev_server)
    thread = await client.threads.create()
    llm.push(text_reply("hello"))
    await client.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "hi"}]},
        context={
            "workspace": workspace,
            "chat_mode": "chat",
            "user_id": "carol",
            "system_prompt": "For {user_id}.",
        },
    )
    assert system_prompt_of(llm.requests[-1]).startswith("For carol.")


async def test_the_same_handler_under_aegra(serve, llm, workspace):  # noqa: F811 - the fixture
    """``make serve`` (Aegra) loads the same ``auth.path``: keys, owners, identity and run rules hold."""
    served = serve(
        WORKSPACE_AGENT_API_KEYS=",".join(f"{key}:{user}" for user, key in KEYS.items()),
        ALWAYS_ASK_TOOLS="calculate",
    )
    url = served.urls[0]
    assert httpx.post(f"{url}/threads/search", json={}, timeout=10).status_code == 401
    alice, bob = as_user(url, "alice"), as_user(url, "bob")
    thread_id, _ = await alice_thread_waiting(url, llm, workspace)
    with pytest.raises(httpx.HTTPStatusError):
        await bob.threads.get_state(thread_id)
    assert thread_id not in [t["thread_id"] for t in await bob.threads.search(limit=100)]
    with pytest.raises(httpx.HTTPStatusError):
        await bob.runs.wait(thread_id, "agent", command={"resume": {"decisions": [{"type": "approve"}]}})
    assert (await alice.threads.get_state(thread_id))["next"] == ["approve"]

    thread = await bob.threads.create()
    for context in (
        {"workspace": workspace, "user_id": "alice"},
        {"workspace": workspace, "auto_approved": ["*"]},
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.runs.wait(
                thread["thread_id"],
                "agent",
                input={"messages": [{"role": "user", "content": "x"}]},
                context=context,
            )
        assert status_of(refused.value) == 403
    llm.reset()
    llm.push(tool_reply(("calculate", {"expression": "1 + 1"})))
    await bob.runs.wait(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "1+1?"}]},
        context={"workspace": workspace, "system_prompt": "You serve {user_id}."},
    )
    assert system_prompt_of(llm.requests[-1]).startswith("You serve bob.")
    state = await bob.threads.get_state(thread["thread_id"])
    assert [a["name"] for a in state["tasks"][0]["interrupts"][0]["value"]["action_requests"]] == [
        "calculate"
    ]


async def test_under_aegra_the_memory_job_covers_others_only_as_the_service(
    serve,  # noqa: F811 - the fixture
    llm,
    monkeypatch,
    database_url,
    workspace,
):
    """A user's key runs the memory graph over their own chats only, and schedules nothing wider; the
    deployment's service key runs the memory graph over everyone's chats and nothing else."""
    monkeypatch.setattr(llm, "rule", memory_rule)
    for user in ("alice", "bob"):
        await seed(database_url, workspace, 5, user=user)
    await quiet_crons(database_url)
    service_key = "service-key-5e1b"
    served = serve(
        WORKSPACE_AGENT_API_KEYS=",".join(f"{key}:{user}" for user, key in KEYS.items()),
        WORKSPACE_AGENT_SERVICE_KEY=service_key,
    )
    url = served.urls[0]
    bob = as_user(url, "bob")
    every = {"workspace": workspace, "idle_minutes": 0}
    for context in (every, {**every, "user_id": "alice"}, None):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.crons.create("memory", schedule="*/5 * * * *", input={}, context=context)
        assert status_of(refused.value) == 403, context
    with pytest.raises(httpx.HTTPStatusError) as refused:  # would run as the context's default user
        await bob.crons.create(
            "agent", schedule="*/5 * * * *", input={"messages": [{"role": "user", "content": "hi"}]}
        )
    assert status_of(refused.value) == 403
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.runs.wait(None, "memory", input={}, context={**every, "user_id": "alice"})
    assert status_of(refused.value) == 403
    await bob.runs.wait(None, "memory", input={}, context=every)
    assert await marked_by_user(database_url, workspace) == {"alice": 0, "bob": 5}, "bob's chats only"

    service = get_client(url=url, api_key=service_key)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await service.runs.wait(
            None, "agent", input={"messages": [{"role": "user", "content": "hi"}]}, context=every
        )
    assert status_of(refused.value) == 403
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await service.assistants.create("agent", context={"workspace": workspace})
    assert status_of(refused.value) == 403
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await service.store.put_item(("alice",), "k", {"v": 1})
    assert status_of(refused.value) == 403
    await service.runs.wait(None, "memory", input={}, context=every)
    assert await marked_by_user(database_url, workspace) == {"alice": 5, "bob": 5}
    assert llm.requests, "the chats were read by the model, not marked unread"
