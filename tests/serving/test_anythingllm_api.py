"""Issue 21, items 3, 4 and 5 for ``/api/v1``: AnythingLLM's developer API, with requests shaped as its docs.

The bodies below are those of AnythingLLM's ``server/endpoints/api/workspace``, ``workspaceThread`` and
``document`` (swagger examples and handlers), sent with ``httpx`` and ``Authorization: Bearer <key>`` as its
clients send them. The same checks run against ``langgraph dev`` with API keys (``secured_server``) and
against ``make serve`` (Aegra). The scripted model plays the model; what reached it (``llm.requests``) shows
the history, the documents and the tools.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid

import httpx
import psycopg
from langgraph_sdk import get_client

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.support.helpers import until_settled
from workspace_agent.checkpoints.chatlog import PostgresRecords
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.server.anythingllm_api import SESSION_KEY as SESSION_METADATA
from workspace_agent.server.anythingllm_api import WORKSPACE_KEY as WORKSPACE_METADATA

KEY_SETTING = ",".join(f"{key}:{user}" for user, key in KEYS.items())
SECRET = "The launch code word of the Heron project is PELICAN-42."


def api(url: str, user: str | None = "alice") -> httpx.AsyncClient:
    """An HTTP client of a server's ``/api/v1`` with a user's key as AnythingLLM clients send it."""
    headers = {"Authorization": f"Bearer {KEYS[user]}"} if user else {}
    return httpx.AsyncClient(base_url=f"{url}/api/v1", headers=headers, timeout=120)


async def make_workspace(url: str, user: str, workspace: str, **context: object) -> None:
    """A workspace of ``user``'s: an assistant of the agent graph with that context (the documented way)."""
    client = get_client(url=url, api_key=KEYS[user])
    await client.assistants.create("agent", context={"workspace": workspace, **context}, name=workspace)


def prompt_text(request: dict) -> str:
    """Everything the model was sent, as one text."""
    return json.dumps(request["messages"])


def events(body: str) -> list[dict]:
    """The ``data: {json}`` chunks of a stream-chat answer."""
    return [json.loads(line[6:]) for line in body.split("\n\n") if line.startswith("data: ")]


def logged(database_url: str, workspace: str) -> list[tuple[str, str]]:
    """The workspace's chat log rows: prompt and response."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT prompt, response FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,)
        ).fetchall()
    return [tuple(r) for r in rows]


async def check_workspaces_and_sessions(url: str, llm, workspace: str) -> None:
    """The caller's workspaces; a sessionId keeps its history, ``reset`` starts over, bob's is his own."""
    await make_workspace(url, "alice", workspace)
    async with api(url) as alice, api(url, "bob") as bob:
        listed = (await alice.get("/workspaces")).json()["workspaces"]
        assert {w["slug"] for w in listed} >= {workspace, "default"}
        assert {"id", "name", "slug", "openAiHistory", "openAiPrompt", "threads"} <= set(listed[0])
        assert workspace not in {w["slug"] for w in (await bob.get("/workspaces")).json()["workspaces"]}

        llm.reset()
        llm.push(text_reply("Nice to meet you, Ann."), text_reply("Your name is Ann."))
        body = {"message": "My name is Ann.", "mode": "chat", "sessionId": "crm-42", "attachments": []}
        first = await alice.post(f"/workspace/{workspace}/chat", json={**body, "reset": False})
        assert first.status_code == 200, first.text
        reply = first.json()
        assert reply["type"] == "textResponse" and reply["textResponse"] == "Nice to meet you, Ann."
        assert reply["close"] is True and reply["error"] is None and reply["id"]
        second = await alice.post(
            f"/workspace/{workspace}/chat", json={**body, "message": "What is my name?"}
        )
        assert second.json()["textResponse"] == "Your name is Ann."
        assert "My name is Ann." in prompt_text(llm.requests[-1])
        assert "Nice to meet you, Ann." in prompt_text(llm.requests[-1])
        history = (await alice.get(f"/workspace/{workspace}/chats", params={"apiSessionId": "crm-42"})).json()
        assert [(h["role"], h["content"]) for h in history["history"]] == [
            ("user", "My name is Ann."),
            ("assistant", "Nice to meet you, Ann."),
            ("user", "What is my name?"),
            ("assistant", "Your name is Ann."),
        ]

        llm.reset()
        llm.push(text_reply("I do not know your name."))
        elsewhere = await bob.post(
            f"/workspace/{workspace}/chat", json={**body, "message": "What is my name?"}
        )
        assert elsewhere.status_code == 404, "bob has no workspace of that name"
        await make_workspace(url, "bob", workspace)
        theirs = await bob.post(f"/workspace/{workspace}/chat", json={**body, "message": "What is my name?"})
        assert theirs.status_code == 200, theirs.text
        assert "Ann" not in prompt_text(llm.requests[-1]), "bob's crm-42 is not alice's"

        reset = await alice.post(f"/workspace/{workspace}/chat", json={**body, "message": "", "reset": True})
        assert reset.json()["textResponse"] == "Chat history was reset!"
        llm.reset()
        llm.push(text_reply("Hello."))
        await alice.post(f"/workspace/{workspace}/chat", json={**body, "message": "Who am I?"})
        assert "Ann" not in prompt_text(llm.requests[-1])


async def check_threads_and_streams(url: str, llm, workspace: str) -> None:
    """thread/new, a thread's chat and stream-chat in AnythingLLM's chunks; bob reaches none of it."""
    async with api(url) as alice, api(url, "bob") as bob:
        made = await alice.post(f"/workspace/{workspace}/thread/new", json={"userId": 1, "name": "Plans"})
        thread = made.json()["thread"]
        assert made.json()["message"] is None and thread["name"] == "Plans" and thread["slug"]
        slug = thread["slug"]
        llm.reset()
        llm.push(text_reply("Noted: the offsite is in May."), text_reply("It is in May, as you said."))
        said = await alice.post(
            f"/workspace/{workspace}/thread/{slug}/chat",
            json={"message": "The offsite is in May.", "mode": "chat", "userId": 1, "attachments": []},
        )
        assert said.json()["textResponse"] == "Noted: the offsite is in May."

        streamed = await alice.post(
            f"/workspace/{workspace}/thread/{slug}/stream-chat",
            json={"message": "When is the offsite?", "mode": "chat", "userId": 1, "reset": False},
        )
        assert streamed.headers["content-type"].startswith("text/event-stream")
        chunks = events(streamed.text)
        texts = [c for c in chunks if c["type"] == "textResponseChunk" and not c["close"]]
        assert "".join(c["textResponse"] for c in texts) == "It is in May, as you said."
        closing = [c for c in chunks if c["close"]]
        assert closing and closing[0]["type"] == "textResponseChunk" and closing[-1]["error"] is False
        assert "The offsite is in May." in prompt_text(llm.requests[-1])

        for route in ("chat", "stream-chat"):
            refused = await bob.post(
                f"/workspace/{workspace}/thread/{slug}/{route}", json={"message": "What did alice say?"}
            )
            assert refused.status_code == 404 and refused.json()["type"] == "abort"
        kept = (await alice.get(f"/workspace/{workspace}/thread/{slug}/chats")).json()["history"]
        assert [h["content"] for h in kept][-1] == "It is in May, as you said."
        assert (await bob.get(f"/workspace/{workspace}/thread/{slug}/chats")).status_code == 404
        missing = await alice.post(
            f"/workspace/{workspace}/thread/no-such-thread/chat", json={"message": "x"}
        )
        assert missing.status_code == 404

        llm.reset()
        llm.push(text_reply("Streamed reply."))
        plain = await alice.post(
            f"/workspace/{workspace}/stream-chat", json={"message": "Hi", "sessionId": "stream-1"}
        )
        kinds = [c["type"] for c in events(plain.text)]
        assert kinds[-1] == "finalizeResponseStream" and "textResponseChunk" in kinds


async def check_documents(url: str, llm, workspace: str) -> None:
    """An upload joins alice's workspace only: vector search finds it, and a chat is answered from it."""
    async with api(url) as alice, api(url, "bob") as bob:
        uploaded = await alice.post(
            "/document/upload",
            files={"file": ("heron.txt", SECRET.encode(), "text/plain")},
            data={"addToWorkspaces": workspace},
        )
        assert uploaded.status_code == 200, uploaded.text
        answer = uploaded.json()
        assert answer["success"] is True and answer["error"] is None
        assert answer["documents"][0]["title"] == "heron.txt"
        assert answer["documents"][0]["workspaces"][0]["outcome"] == "added"

        found = await alice.post(
            f"/workspace/{workspace}/vector-search",
            json={"query": "launch code word of the Heron project", "topN": 4, "scoreThreshold": 0.1},
        )
        results = found.json()["results"]
        assert results and "PELICAN-42" in results[0]["text"]
        assert {"id", "text", "metadata", "distance", "score"} <= set(results[0])
        assert results[0]["metadata"]["title"] == "heron.txt"

        theirs = await bob.post(
            f"/workspace/{workspace}/vector-search", json={"query": "launch code word of the Heron project"}
        )
        assert "PELICAN" not in theirs.text, "bob's workspace of that name is his own"

        llm.reset()
        llm.push(text_reply("It is PELICAN-42."))
        said = await alice.post(
            f"/workspace/{workspace}/chat",
            json={"message": "What is the launch code word of the Heron project?", "mode": "query"},
        )
        assert said.json()["textResponse"] == "It is PELICAN-42."
        assert "PELICAN-42" in prompt_text(llm.requests[-1])
        assert said.json()["sources"] and said.json()["sources"][0]["title"] == "heron.txt"

        memo = base64.b64encode(b"Memo: the travel budget for May is 4200 euros.").decode()
        llm.reset()
        llm.push(text_reply("4200 euros."))
        attached = await alice.post(
            f"/workspace/{workspace}/chat",
            json={
                "message": "What is the travel budget for May?",
                "mode": "chat",
                "sessionId": "with-a-memo",
                "attachments": [
                    {
                        "name": "memo.txt",
                        "mime": "application/anythingllm-document",
                        "contentString": f"data:text/plain;base64,{memo}",
                    }
                ],
                "reset": False,
            },
        )
        assert attached.json()["textResponse"] == "4200 euros."
        assert "4200 euros" in prompt_text(llm.requests[-1]), "the attached document reached the model"

        nowhere = await alice.post(
            "/document/upload",
            files={"file": ("x.txt", b"some text", "text/plain")},
            data={"addToWorkspaces": "no-such-workspace"},
        )
        assert nowhere.status_code == 404 and nowhere.json()["success"] is False


async def check_approval(url: str, llm, workspace: str, database_url: str) -> None:
    """A call that needs approval comes back pending, by id; approve saves the note, reject does not."""
    records = PostgresRecords(database_url)
    async with api(url) as alice:
        for decision, saved in (("reject", False), ("approve", True)):
            note = f"buy milk {decision}"
            llm.reset()
            llm.push(tool_reply(("save_note", {"text": note})), text_reply(f"{decision}: done"))
            body = {"message": f"@agent note that I must {note}", "sessionId": f"approval-{decision}"}
            asked = await alice.post(f"/workspace/{workspace}/chat", json=body)
            pending = asked.json()["pendingApproval"]
            call = pending["calls"][0]
            assert call["name"] == "save_note" and call["args"] == {"text": note} and call["id"]
            assert "save_note" in asked.json()["textResponse"]
            assert note not in await records.notes(workspace, "alice")

            unknown = await alice.post(
                f"/workspace/{workspace}/chat",
                json={
                    "sessionId": body["sessionId"],
                    "decisions": [{"type": decision, "tool_call_id": "nope"}],
                },
            )
            assert unknown.status_code == 400 and unknown.json()["error"], unknown.text
            assert unknown.json()["pendingApproval"]["calls"][0]["id"] == call["id"], "still pending"

            answered = await alice.post(
                f"/workspace/{workspace}/chat",
                json={
                    "sessionId": body["sessionId"],
                    "decisions": [{"type": decision, "tool_call_id": call["id"]}],
                },
            )
            assert answered.status_code == 200, answered.text
            assert answered.json()["textResponse"] == f"{decision}: done"
            assert "pendingApproval" not in answered.json()
            assert (note in await records.notes(workspace, "alice")) is saved

        llm.reset()
        llm.push(tool_reply(("save_note", {"text": "buy mlik"})), text_reply("edited: done"))
        asked = await alice.post(
            f"/workspace/{workspace}/chat", json={"message": "@agent note: buy mlik", "sessionId": "edit"}
        )
        call = asked.json()["pendingApproval"]["calls"][0]
        edit = {"name": "save_note", "args": {"text": "buy milk, edited"}}
        edited = await alice.post(
            f"/workspace/{workspace}/chat",
            json={
                "sessionId": "edit",
                "decisions": [{"type": "edit", "tool_call_id": call["id"], "edited_action": edit}],
            },
        )
        assert edited.json()["textResponse"] == "edited: done"
        assert "buy milk, edited" in await records.notes(workspace, "alice")
        assert "buy mlik" not in await records.notes(workspace, "alice")

        made = (await alice.post(f"/workspace/{workspace}/thread/new", json={})).json()["thread"]
        llm.reset()
        llm.push(tool_reply(("save_note", {"text": "thread note"})), text_reply("saved in the thread"))
        asked = await alice.post(
            f"/workspace/{workspace}/thread/{made['slug']}/stream-chat", json={"message": "@agent note it"}
        )
        last = next(c for c in events(asked.text) if c["close"])
        call = last["pendingApproval"]["calls"][0]
        approved = await alice.post(
            f"/workspace/{workspace}/thread/{made['slug']}/approve",
            json={"decisions": [{"type": "approve", "tool_call_id": call["id"]}]},
        )
        assert approved.json()["textResponse"] == "saved in the thread"
        assert "thread note" in await records.notes(workspace, "alice")


async def check_refusals(url: str, workspace: str) -> None:
    """403 without a key or with a wrong one (AnythingLLM's ``validApiKey``), 404 for an unknown workspace."""
    async with api(url, None) as nobody:
        for headers in ({}, {"Authorization": "Bearer guess"}):
            refused = await nobody.get("/workspaces", headers=headers)
            assert refused.status_code == 403 and refused.json() == {"error": "No valid api key found."}
        refused = await nobody.post(f"/workspace/{workspace}/chat", json={"message": "hi"})
        assert refused.status_code == 403
    async with api(url) as alice:
        unknown = await alice.post("/workspace/no-such-workspace/chat", json={"message": "hi"})
        assert unknown.status_code == 404 and unknown.json()["type"] == "abort"
        broken = await alice.post(
            f"/workspace/{workspace}/chat", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400 and broken.json()["error"]
        empty = await alice.post(f"/workspace/{workspace}/chat", json={"message": ""})
        assert empty.status_code == 400 and empty.json()["error"] == "Message is empty"
        mode = await alice.post(f"/workspace/{workspace}/chat", json={"message": "x", "mode": "loose"})
        assert mode.status_code == 400 and mode.json()["error"] == "loose is not a valid mode."
        huge = await alice.post(f"/workspace/{workspace}/thread/new", json={"name": "x" * (2 * 1024 * 1024)})
        assert huge.status_code == 413


async def check_model_failure(url: str, llm, workspace: str) -> None:
    """A turn whose model fails is answered ``type: "abort"`` with the reason, whole or streamed."""
    failing = {"status": 500, "content": "the model is down"}
    async with api(url) as alice:
        llm.reset()
        llm.push(failing, failing, failing)
        failed = await alice.post(f"/workspace/{workspace}/chat", json={"message": "Hi", "sessionId": "down"})
        assert failed.status_code == 500 and failed.json()["type"] == "abort" and failed.json()["error"]
        llm.reset()
        llm.push(failing, failing, failing)
        streamed = await alice.post(
            f"/workspace/{workspace}/stream-chat", json={"message": "Hi", "sessionId": "down-too"}
        )
        last = events(streamed.text)[-1]
        assert last["type"] == "abort" and last["close"] is True and last["error"]


async def check_leaving_mid_stream(url: str, llm, database_url: str) -> None:
    """The run of a stream whose client went away is cancelled: nothing half-written reaches the chat log."""
    workspace = f"ws-gone-{uuid.uuid4().hex[:8]}"
    await make_workspace(url, "alice", workspace)
    llm.reset()
    llm.push({**text_reply("too late"), "delay": 4})
    async with api(url) as alice:
        async with alice.stream(
            "POST",
            f"/workspace/{workspace}/stream-chat",
            json={"message": "take your time", "sessionId": "gone"},
        ) as streaming:
            assert streaming.status_code == 200
            await asyncio.sleep(1.5)  # the run is under way, the model still thinking; leave
    await until_settled(url, KEYS["alice"], {WORKSPACE_METADATA: workspace, SESSION_METADATA: "gone"})
    assert logged(database_url, workspace) == []


async def test_api_v1_under_langgraph_dev(secured_server, llm, workspace, database_url):  # noqa: F811
    await check_workspaces_and_sessions(secured_server, llm, workspace)
    await check_threads_and_streams(secured_server, llm, workspace)
    await check_documents(secured_server, llm, workspace)
    await check_approval(secured_server, llm, workspace, database_url)
    await check_refusals(secured_server, workspace)
    await check_model_failure(secured_server, llm, workspace)
    await check_leaving_mid_stream(secured_server, llm, database_url)


async def test_api_v1_under_make_serve(keyed_served_url, llm, workspace, database_url):  # noqa: F811
    url = keyed_served_url
    await check_workspaces_and_sessions(url, llm, workspace)
    await check_threads_and_streams(url, llm, workspace)
    await check_documents(url, llm, workspace)
    await check_approval(url, llm, workspace, database_url)
    await check_refusals(url, workspace)
    await check_model_failure(url, llm, workspace)
    await check_leaving_mid_stream(url, llm, database_url)


async def test_without_keys_everyone_is_the_local_user(dev_server, llm):
    """A single-user server needs no key; its ``default`` workspace is always there."""
    llm.reset()
    llm.push(text_reply("Hello, local user."))
    async with httpx.AsyncClient(base_url=f"{dev_server}/api/v1", timeout=120) as local:
        assert "default" in {w["slug"] for w in (await local.get("/workspaces")).json()["workspaces"]}
        said = await local.post(
            "/workspace/default/chat", json={"message": "Hi", "sessionId": uuid.uuid4().hex}
        )
        assert said.json()["textResponse"] == "Hello, local user."
