"""Issue 36, item 3, on the other APIs: a shared workspace through the OpenAI and AnythingLLM routes.

A member reaches a workspace shared with him as he does through ``langgraph_sdk``: ``/v1/models`` lists it
as ``owner/slug`` (the ``openai`` SDK sends that as its ``model``), and ``/api/v1`` lists it as
``owner~slug`` (a path segment holds no ``/``). He is answered from the owner's documents under the
published settings; as a member he changes nothing of hers, as a manager he changes the settings; a
stranger, and he once removed, cannot tell it from a workspace nobody has. Told on ``langgraph dev`` with
keys and on ``make serve``.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.security.test_workspaces import QUESTION, alice_has_the_secret, as_user, prompts_since
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from workspace_agent.checkpoints.chunks import DocumentStore
from workspace_agent.core.context import document_scope
from workspace_agent.samples.scripted_model import text_reply

PROMPT = "You answer for the north office of Lanternfish."


def anythingllm(url: str, user: str) -> httpx.AsyncClient:
    """AnythingLLM's client: its key as a Bearer token, its paths under ``/api/v1``."""
    headers = {"Authorization": f"Bearer {KEYS[user]}"}
    return httpx.AsyncClient(base_url=f"{url}/api/v1", headers=headers, timeout=120)


def openai_client(url: str, user: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEYS[user], max_retries=0, timeout=120)


async def models(url: str, user: str) -> list[str]:
    return [m.id async for m in openai_client(url, user).models.list()]


async def completion(url: str, user: str, model: str, llm, reply: str = "ok") -> str:
    llm.push(text_reply(reply))
    answer = await openai_client(url, user).chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}]
    )
    return answer.choices[0].message.content or ""


async def titles(workspace: str, pinned: bool = False) -> list[str]:
    """Her workspace's documents (only the pinned ones with ``pinned``)."""
    held = await DocumentStore().list_documents(document_scope("alice", workspace))
    return sorted(d.title for d in held if d.pinned or not pinned)


async def shared_apis_story(url: str, llm, workspace: str) -> None:
    alice = as_user(url, "alice")
    await alice.assistants.create("agent", context={"workspace": workspace, "system_prompt": PROMPT})
    await alice_has_the_secret(url, llm, workspace)
    ref, slug, nobody = f"alice/{workspace}", f"alice~{workspace}", f"alice~{workspace}-nobody"

    async with anythingllm(url, "bob") as bob:
        # a stranger: not listed, refused in the words a workspace nobody has gets, before any model call
        start = len(llm.requests)
        assert ref not in await models(url, "bob")
        with pytest.raises(openai.NotFoundError) as hers:
            await completion(url, "bob", ref, llm)
        with pytest.raises(openai.NotFoundError) as none:
            await completion(url, "bob", f"{ref}-nobody", llm)
        assert str(hers.value).replace(ref, "<ws>") == str(none.value).replace(f"{ref}-nobody", "<ws>")
        said = await bob.post(f"/workspace/{slug}/chat", json={"message": QUESTION, "mode": "query"})
        other = await bob.post(f"/workspace/{nobody}/chat", json={"message": QUESTION, "mode": "query"})
        assert (said.status_code, other.status_code) == (404, 404)
        assert said.json()["error"].replace(slug, "<ws>") == other.json()["error"].replace(nobody, "<ws>")
        assert slug not in [w["slug"] for w in (await bob.get("/workspaces")).json()["workspaces"]]
        assert (await bob.get(f"/workspace/{slug}")).json() == {"workspace": []}
        assert len(llm.requests) == start, "no turn ran"
        llm.script.clear()

        # a member: listed on both APIs, answered from her document under her prompt
        await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "member"})
        assert ref in await models(url, "bob")
        start = len(llm.requests)
        assert await completion(url, "bob", ref, llm, reply="It is 7315.") == "It is 7315."
        prompt = prompts_since(llm, start)
        assert "7315" in prompt and PROMPT in prompt, "her document, her settings (OpenAI route)"

        listed = {w["slug"]: w for w in (await bob.get("/workspaces")).json()["workspaces"]}
        assert listed[slug]["openAiPrompt"] == PROMPT and listed[slug]["name"] == ref
        [record] = (await bob.get(f"/workspace/{slug}")).json()["workspace"]
        assert [d["filename"] for d in record["documents"]] == ["ledger.txt"]
        start = len(llm.requests)
        llm.push(text_reply("The code is 7315."))
        chat = await bob.post(f"/workspace/{slug}/chat", json={"message": QUESTION, "mode": "query"})
        assert chat.status_code == 200, chat.text
        assert chat.json()["textResponse"] == "The code is 7315."
        prompt = prompts_since(llm, start)
        assert "7315" in prompt and PROMPT in prompt, "her document, her settings (AnythingLLM route)"
        history = (await bob.get(f"/workspace/{slug}/chats")).json()["history"]
        assert [h["content"] for h in history] == [QUESTION, "The code is 7315."]
        async with anythingllm(url, "alice") as hers_api:
            [own] = (await hers_api.get(f"/workspace/{workspace}")).json()["workspace"]
            assert own["threads"] == [], "his conversation is his own"

        # a member changes nothing of hers: settings, pins, documents, the workspace itself
        update = await bob.post(f"/workspace/{slug}/update", json={"openAiPrompt": "Mine now."})
        assert update.status_code == 403, update.text
        pin = await bob.post(
            f"/workspace/{slug}/update-pin",
            json={"docPath": record["documents"][0]["docpath"], "pinStatus": True},
        )
        assert pin.status_code == 403, pin.text
        text = {"textContent": "Forged rota.", "metadata": {"title": "forged.txt"}, "addToWorkspaces": slug}
        upload = await bob.post("/document/raw-text", json=text)
        assert upload.status_code == 403, upload.text
        assert (await bob.delete(f"/workspace/{slug}")).status_code == 403
        assert await titles(workspace) == ["ledger.txt"]
        assert await titles(workspace, pinned=True) == []

        # a manager: his settings change reaches the members' runs on the OpenAI route
        await alice.http.put(f"/workspaces/{workspace}/members/bob", json={"role": "manager"})
        update = await bob.post(f"/workspace/{slug}/update", json={"openAiPrompt": "Rota first."})
        assert update.status_code == 200, update.text
        assert update.json()["workspace"]["openAiPrompt"] == "Rota first."
        start = len(llm.requests)
        await completion(url, "bob", ref, llm)
        assert "Rota first." in prompts_since(llm, start)
        assert (await bob.delete(f"/workspace/{slug}")).status_code == 403, "only its owner deletes it"

        # removed: gone from both lists, refused in the stranger's words
        await alice.http.delete(f"/workspaces/{workspace}/members/bob")
        start = len(llm.requests)
        assert ref not in await models(url, "bob")
        with pytest.raises(openai.NotFoundError):
            await completion(url, "bob", ref, llm)
        after = await bob.post(f"/workspace/{slug}/chat", json={"message": QUESTION, "mode": "query"})
        assert after.status_code == 404 and after.json()["error"] == said.json()["error"]
        assert (await bob.get(f"/workspace/{slug}")).json() == {"workspace": []}
        assert len(llm.requests) == start
        llm.script.clear()


async def test_shared_workspace_through_the_openai_and_anythingllm_apis_on_langgraph_dev(
    secured_server,  # noqa: F811
    llm,
    workspace,
):
    await shared_apis_story(secured_server, llm, workspace)


async def test_shared_workspace_through_the_openai_and_anythingllm_apis_on_make_serve(
    keyed_served_url,  # noqa: F811
    llm,
    workspace,
):
    await shared_apis_story(keyed_served_url, llm, workspace)
