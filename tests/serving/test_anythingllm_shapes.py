"""Issue 37, items 1 and 2: ``/api/v1`` answers in the exact shapes AnythingLLM's own source gives.

Each expected shape names the file of AnythingLLM's source (``Mintplex-Labs/anything-llm``) it is read from:

- ``server/endpoints/api/auth/index.js``: ``GET /v1/auth`` is ``{"authenticated": true}``;
  ``server/utils/middleware/validApiKey.js``: no key or a wrong one is 403 ``{"error": "No valid api key
  found."}``; ``server/endpoints/system.js``: ``GET /api/ping`` is ``{"online": true}``, without a key.
- ``server/endpoints/api/workspace/index.js``: ``GET /v1/workspace/:slug`` is ``{"workspace": [...]}``
  (``findMany``: an unknown slug is ``[]``), each with ``documents`` and ``threads``; the fields are the
  ``workspaces`` model of ``server/prisma/schema.prisma``; ``/workspaces`` threads select
  ``user_id slug name``.
- ``server/endpoints/api/workspaceThread/index.js`` and ``server/models/workspaceThread.js``: ``thread/new``
  gives a ``workspace_threads`` row, a slugified slug, and 200 ``{thread: null, message}`` on a duplicate.
- ``server/utils/chats/apiChatHandler.js`` and ``server/utils/helpers/chat/responses.js``: the chat reply's
  ``chatId`` and ``metrics``, the ``finalizeResponseStream`` chunk, the one-chunk query refusal, the reset,
  and ``convertToChatHistory``'s history items; ``LLMPerformanceMonitor.js``: the metrics' keys.

Run under ``langgraph dev`` with API keys (``secured_server``), then all again under ``make serve`` (Aegra);
the scripted model plays the model.
"""

from __future__ import annotations

import json
import uuid

import httpx
import psycopg

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.serving.test_anythingllm_api import api, events, make_workspace
from workspace_agent.samples.scripted_model import text_reply

NO_KEY = {"error": "No valid api key found."}
#: The ``workspaces`` model's columns (``server/prisma/schema.prisma``, relations left out).
WORKSPACE_FIELDS = {
    "id",
    "name",
    "slug",
    "vectorTag",
    "createdAt",
    "openAiTemp",
    "openAiHistory",
    "lastUpdatedAt",
    "openAiPrompt",
    "similarityThreshold",
    "chatProvider",
    "chatModel",
    "topN",
    "chatMode",
    "pfpFilename",
    "agentProvider",
    "agentModel",
    "queryRefusalResponse",
    "vectorSearchMode",
}
#: ``workspace_threads`` (``schema.prisma``): what ``WorkspaceThread.new`` returns.
THREAD_FIELDS = {"id", "name", "slug", "workspace_id", "user_id", "createdAt", "lastUpdatedAt"}
#: ``StreamMetrics`` of ``LLMPerformanceMonitor.js`` (``model``, ``provider``, ``timestamp`` are optional).
METRIC_FIELDS = {"prompt_tokens", "completion_tokens", "total_tokens", "outputTps", "duration"}
#: ``chatSync``'s answered reply (``apiChatHandler.js``); ``uuid`` is ours beside ``id``.
CHAT_FIELDS = {"id", "type", "close", "error", "chatId", "textResponse", "sources", "metrics"}


def fresh() -> str:
    """A new workspace name (the ``workspace`` fixture's form), for the checks run again under Aegra."""
    return f"ws-{uuid.uuid4().hex[:8]}"


def chat_log_ids(database_url: str, workspace: str) -> list[int]:
    """The workspace's chat log row ids, oldest first."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT id FROM chat_log WHERE workspace = %s ORDER BY id", (workspace,)
        ).fetchall()
    return [r[0] for r in rows]


def check_metrics(metrics: dict) -> None:
    """The keys and types ``LLMPerformanceMonitor`` gives: counts (reported or estimated), seconds, rate."""
    assert METRIC_FIELDS <= set(metrics), metrics
    assert all(isinstance(metrics[k], int) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    assert isinstance(metrics["outputTps"], int | float) and isinstance(metrics["duration"], int | float)
    assert metrics["total_tokens"] == metrics["prompt_tokens"] + metrics["completion_tokens"]
    assert metrics["duration"] > 0 and metrics["prompt_tokens"] > 0 and metrics["completion_tokens"] > 0
    assert metrics["outputTps"] == metrics["completion_tokens"] / metrics["duration"]


async def test_auth_answers_authenticated(secured_server):  # noqa: F811
    async with api(secured_server) as alice:
        checked = await alice.get("/auth")
        assert checked.status_code == 200 and checked.json() == {"authenticated": True}


async def test_no_key_or_a_wrong_one_is_403(secured_server):  # noqa: F811
    async with api(secured_server, None) as nobody:
        for headers in ({}, {"Authorization": "Bearer guess"}):
            for route in ("/auth", "/workspaces"):
                refused = await nobody.get(route, headers=headers)
                assert refused.status_code == 403 and refused.json() == NO_KEY, (route, refused.text)
        refused = await nobody.post("/workspace/default/chat", json={"message": "hi"})
        assert refused.status_code == 403 and refused.json() == NO_KEY


async def test_ping_needs_no_key(secured_server):  # noqa: F811
    async with httpx.AsyncClient(base_url=secured_server, timeout=60) as plain:
        ping = await plain.get("/api/ping")
        assert ping.status_code == 200 and ping.json() == {"online": True}


async def test_workspace_by_slug(secured_server, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice, api(secured_server, "bob") as bob:
        made = await alice.post(f"/workspace/{workspace}/thread/new", json={"slug": "plans"})
        assert made.status_code == 200, made.text
        uploaded = await alice.post(
            "/document/upload",
            files={"file": ("memo.txt", b"The memo says the budget is 4200 euros.", "text/plain")},
            data={"addToWorkspaces": workspace},
        )
        assert uploaded.status_code == 200, uploaded.text

        got = await alice.get(f"/workspace/{workspace}")
        assert got.status_code == 200, got.text
        assert set(got.json()) == {"workspace"} and len(got.json()["workspace"]) == 1
        record = got.json()["workspace"][0]
        assert set(record) == WORKSPACE_FIELDS | {"documents", "threads"}
        assert record["slug"] == workspace and isinstance(record["openAiHistory"], int)
        assert record["threads"] == [{"user_id": "alice", "slug": "plans"}]
        assert [d["filename"] for d in record["documents"]] == ["memo.txt"]
        assert isinstance(json.loads(record["documents"][0]["metadata"]), dict)

        assert (await bob.get(f"/workspace/{workspace}")).json() == {"workspace": []}, "a stranger's slug"
        missing = await alice.get("/workspace/no-such-workspace")
        assert missing.status_code == 200 and missing.json() == {"workspace": []}


async def test_workspaces_have_every_field_and_their_threads(secured_server, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        made = await alice.post(f"/workspace/{workspace}/thread/new", json={"name": "Plans", "slug": "plans"})
        assert made.status_code == 200, made.text
        listed = {w["slug"]: w for w in (await alice.get("/workspaces")).json()["workspaces"]}
        assert set(listed[workspace]) == WORKSPACE_FIELDS | {"threads"}
        assert listed[workspace]["threads"] == [{"user_id": "alice", "slug": "plans", "name": "Plans"}]


async def test_new_thread_row_slug_and_duplicate(secured_server, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        made = await alice.post(
            f"/workspace/{workspace}/thread/new", json={"name": "Plans", "slug": "Q3 Plan!"}
        )
        assert made.status_code == 200, made.text
        thread = made.json()["thread"]
        assert set(thread) == THREAD_FIELDS and made.json()["message"] is None
        assert thread["slug"] == "q3-plan-bang" and thread["name"] == "Plans"
        assert isinstance(thread["createdAt"], str) and isinstance(thread["lastUpdatedAt"], str)
        again = await alice.post(f"/workspace/{workspace}/thread/new", json={"slug": "q3 plan!"})
        assert again.status_code == 200 and again.json()["thread"] is None
        assert isinstance(again.json()["message"], str) and again.json()["message"]


async def test_chat_reply_has_chat_id_and_metrics(secured_server, llm, workspace, database_url):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        llm.reset()
        llm.push(text_reply("Hello there."))
        said = await alice.post(f"/workspace/{workspace}/chat", json={"message": "Hi", "sessionId": "s1"})
        reply = said.json()
        assert CHAT_FIELDS <= set(reply) <= CHAT_FIELDS | {"uuid"}, reply
        assert reply["type"] == "textResponse" and reply["error"] is None and reply["close"] is True
        assert isinstance(reply["chatId"], int)
        assert reply["chatId"] == chat_log_ids(database_url, workspace)[-1]
        check_metrics(reply["metrics"])


async def test_stream_ends_with_finalize_chunk(secured_server, llm, workspace, database_url):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        llm.reset()
        llm.push(text_reply("Streamed hello."))
        streamed = await alice.post(
            f"/workspace/{workspace}/stream-chat", json={"message": "Hi again", "sessionId": "s1"}
        )
        chunks = events(streamed.text)
        final = chunks[-1]
        assert set(final) == {"uuid", "type", "close", "error", "chatId", "metrics", "sources"}, final
        assert final["type"] == "finalizeResponseStream"
        assert final["close"] is True and final["error"] is False
        assert final["chatId"] == chat_log_ids(database_url, workspace)[-1]
        check_metrics(final["metrics"])
        closing = chunks[-2]
        assert closing["type"] == "textResponseChunk" and closing["close"] is True
        assert closing["textResponse"] == "" and closing["uuid"] == final["uuid"]


async def test_reset_reply(secured_server, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        for route in ("chat", "stream-chat"):
            body = {"message": "", "reset": True, "sessionId": "s1"}
            answer = await alice.post(f"/workspace/{workspace}/{route}", json=body)
            reset = answer.json() if route == "chat" else events(answer.text)[0]
            assert reset["textResponse"] == "Chat history was reset!" and reset["metrics"] == {}
            assert reset["type"] == "textResponse" and reset["close"] is True and reset["error"] is None
            assert ("attachments" in reset) is (route == "stream-chat")
            if route == "stream-chat":
                assert reset["attachments"] == [] and len(events(answer.text)) == 1


async def test_query_refusal_is_one_text_response(secured_server, llm, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        llm.reset()
        for route in ("chat", "stream-chat"):
            body = {"message": "What does the memo say?", "mode": "query", "sessionId": f"q-{route}"}
            answer = await alice.post(f"/workspace/{workspace}/{route}", json=body)
            refusal = answer.json() if route == "chat" else events(answer.text)
            if route == "stream-chat":
                assert len(refusal) == 1, refusal
                refusal = refusal[0]
                assert refusal["attachments"] == []
            assert refusal["type"] == "textResponse" and refusal["close"] is True and refusal["error"] is None
            assert refusal["textResponse"] and refusal["sources"] == [] and refusal["metrics"] == {}
            assert "chatId" not in refusal
        assert llm.requests == [], "a refusal asks no model"


async def chat_three_times(url: str, llm, workspace: str) -> list[int]:
    """Three turns of session ``h``; their ``chatId``s."""
    llm.reset()
    llm.push(text_reply("One."), text_reply("Two."), text_reply("Three."))
    async with api(url) as alice:
        said = [
            await alice.post(f"/workspace/{workspace}/chat", json={"message": text, "sessionId": "h"})
            for text in ("first", "second", "third")
        ]
    return [s.json().get("chatId") for s in said]


async def test_history_items(secured_server, llm, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    ids = await chat_three_times(secured_server, llm, workspace)
    async with api(secured_server) as alice:
        history = (await alice.get(f"/workspace/{workspace}/chats", params={"apiSessionId": "h"})).json()
        items = history["history"]
        assert [(i["role"], i["content"]) for i in items] == [
            ("user", "first"),
            ("assistant", "One."),
            ("user", "second"),
            ("assistant", "Two."),
            ("user", "third"),
            ("assistant", "Three."),
        ]
        user, assistant = items[0], items[1]
        assert set(user) == {"role", "content", "sentAt", "attachments", "chatId"}
        assert set(assistant) == {
            "type",
            "role",
            "content",
            "sources",
            "chatId",
            "sentAt",
            "feedbackScore",
            "metrics",
        }
        assert isinstance(user["sentAt"], int) and user["chatId"] == assistant["chatId"] == ids[0]
        assert assistant["feedbackScore"] is None and assistant["metrics"] == {} and user["attachments"] == []

        made = (await alice.post(f"/workspace/{workspace}/thread/new", json={})).json()["thread"]
        llm.reset()
        llm.push(text_reply("In the thread."))
        await alice.post(f"/workspace/{workspace}/thread/{made['slug']}/chat", json={"message": "hello"})
        kept = (await alice.get(f"/workspace/{workspace}/thread/{made['slug']}/chats")).json()["history"]
        assert [(i["role"], i["content"]) for i in kept] == [
            ("user", "hello"),
            ("assistant", "In the thread."),
        ]
        assert set(kept[1]) >= {"chatId", "sentAt", "metrics", "feedbackScore", "type"}


async def test_history_limit_and_order(secured_server, llm, workspace):  # noqa: F811
    await make_workspace(secured_server, "alice", workspace)
    await chat_three_times(secured_server, llm, workspace)
    async with api(secured_server) as alice:
        newest = await alice.get(
            f"/workspace/{workspace}/chats", params={"apiSessionId": "h", "limit": 2, "orderBy": "desc"}
        )
        assert [i["content"] for i in newest.json()["history"]] == ["third", "Three.", "second", "Two."]
        oldest = await alice.get(f"/workspace/{workspace}/chats", params={"apiSessionId": "h", "limit": 1})
        assert [i["content"] for i in oldest.json()["history"]] == ["first", "One."]


async def test_shapes_under_make_serve(keyed_served_url, llm, database_url):  # noqa: F811
    """The same shapes from ``make serve`` (Aegra), where the routes are mounted the same way."""
    url = keyed_served_url
    await test_auth_answers_authenticated(url)
    await test_no_key_or_a_wrong_one_is_403(url)
    await test_ping_needs_no_key(url)
    await test_workspace_by_slug(url, fresh())
    await test_workspaces_have_every_field_and_their_threads(url, fresh())
    await test_new_thread_row_slug_and_duplicate(url, fresh())
    await test_chat_reply_has_chat_id_and_metrics(url, llm, fresh(), database_url)
    await test_stream_ends_with_finalize_chunk(url, llm, fresh(), database_url)
    await test_reset_reply(url, fresh())
    await test_query_refusal_is_one_text_response(url, llm, fresh())
    await test_history_items(url, llm, fresh())
    await test_history_limit_and_order(url, llm, fresh())
    await test_a_thread_is_renamed_and_deleted_by_its_owner_only(url, fresh())
    await test_a_workspace_is_made_updated_and_deleted_by_its_owner_only(url, fresh())
    await test_upload_metadata_and_pinning_by_its_location(url, fresh())
    await test_raw_text_becomes_a_document_under_its_title(url, fresh())


async def test_a_thread_is_renamed_and_deleted_by_its_owner_only(secured_server, workspace):  # noqa: F811
    """``thread/{t}/update`` and ``DELETE thread/{t}``, as ``workspaceThread/index.js`` answers them."""
    await make_workspace(secured_server, "alice", workspace)
    await make_workspace(secured_server, "bob", workspace)
    async with api(secured_server) as alice, api(secured_server, "bob") as bob:
        made = await alice.post(f"/workspace/{workspace}/thread/new", json={"name": "Plans", "slug": "plans"})
        assert made.status_code == 200, made.text
        renamed = await alice.post(f"/workspace/{workspace}/thread/plans/update", json={"name": "Q3 plans"})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["message"] is None and set(renamed.json()["thread"]) == THREAD_FIELDS
        assert renamed.json()["thread"]["name"] == "Q3 plans" and renamed.json()["thread"]["slug"] == "plans"
        listed = {w["slug"]: w for w in (await alice.get("/workspaces")).json()["workspaces"]}
        assert listed[workspace]["threads"] == [{"user_id": "alice", "slug": "plans", "name": "Q3 plans"}]
        for bad in ({"name": 3}, {"name": "  "}, {}):
            refused = await alice.post(f"/workspace/{workspace}/thread/plans/update", json=bad)
            assert refused.status_code == 400, bad
        # bob names alice's thread slug in his own workspace of that name: nothing of hers is found or touched
        stranger = await bob.post(f"/workspace/{workspace}/thread/plans/update", json={"name": "mine now"})
        assert stranger.status_code == 404 and stranger.json() == {"message": "Thread not found"}
        assert (await bob.delete(f"/workspace/{workspace}/thread/plans")).status_code == 200
        listed = {w["slug"]: w for w in (await alice.get("/workspaces")).json()["workspaces"]}
        assert listed[workspace]["threads"] == [{"user_id": "alice", "slug": "plans", "name": "Q3 plans"}]
        gone = await alice.delete(f"/workspace/{workspace}/thread/plans")
        assert gone.status_code == 200 and gone.content == b""
        listed = {w["slug"]: w for w in (await alice.get("/workspaces")).json()["workspaces"]}
        assert listed[workspace]["threads"] == []
        assert (await alice.get(f"/workspace/{workspace}/thread/plans/chats")).status_code == 404


async def test_a_workspace_is_made_updated_and_deleted_by_its_owner_only(secured_server, workspace):  # noqa: F811
    """``workspace/new``, ``workspace/{slug}/update`` and ``DELETE workspace/{slug}`` (``api/workspace``)."""
    name = f"Sales {workspace}"
    async with api(secured_server) as alice, api(secured_server, "bob") as bob:
        made = await alice.post("/workspace/new", json={"name": name, "openAiHistory": 7, "topN": 2})
        assert made.status_code == 200, made.text
        record, slug = made.json()["workspace"], made.json()["workspace"]["slug"]
        assert made.json()["message"] is None and WORKSPACE_FIELDS <= set(record)
        assert slug == f"sales-{workspace}".lower() and record["name"] == name
        assert record["openAiHistory"] == 7 and record["topN"] == 2 and record["chatMode"] == "automatic"
        again = (await alice.post("/workspace/new", json={"name": name})).json()["workspace"]["slug"]
        assert again.startswith(f"{slug}-") and len(again) == len(slug) + 9, "a taken slug gets -<8 digits>"
        for bad, field in [
            ({"name": name, "topN": "four"}, "top_n"),
            ({"name": name, "chatMode": "x"}, "chat_mode"),
        ]:
            refused = await alice.post("/workspace/new", json=bad)
            assert refused.status_code == 400 and field in refused.json()["message"], refused.text
        assert (await alice.post("/workspace/new", json={"topN": 2})).status_code == 400, "a name is needed"

        updated = await alice.post(f"/workspace/{slug}/update", json={"openAiHistory": 3, "name": "Sales"})
        assert updated.status_code == 200, updated.text
        assert updated.json()["workspace"]["openAiHistory"] == 3 and updated.json()["workspace"]["topN"] == 2
        assert updated.json()["workspace"]["name"] == "Sales" and updated.json()["workspace"]["slug"] == slug
        nothing = await alice.post(f"/workspace/{slug}/update", json={"chatProvider": "openai"})
        assert nothing.status_code == 200 and nothing.json()["message"] == "No valid fields to update!"
        wrong = await alice.post(f"/workspace/{slug}/update", json={"similarityThreshold": "high"})
        assert wrong.status_code == 400 and "similarity_threshold" in wrong.json()["message"]

        # bob names alice's slug: it is not his workspace, so he can neither change nor delete it
        assert (await bob.post(f"/workspace/{slug}/update", json={"openAiHistory": 0})).status_code == 404
        assert (await bob.delete(f"/workspace/{slug}")).status_code == 400
        kept = (await alice.get(f"/workspace/{slug}")).json()["workspace"]
        assert kept and kept[0]["openAiHistory"] == 3

        uploaded = await alice.post(
            "/document/upload",
            files={"file": ("plan.txt", b"The sales plan names Lisbon.", "text/plain")},
            data={"addToWorkspaces": slug},
        )
        assert uploaded.status_code == 200, uploaded.text
        await alice.post(f"/workspace/{slug}/thread/new", json={"slug": "q3"})
        gone = await alice.delete(f"/workspace/{slug}")
        assert gone.status_code == 200 and gone.content == b""
        assert (await alice.get(f"/workspace/{slug}")).json() == {"workspace": []}
        assert (await alice.get(f"/workspace/{slug}/thread/q3/chats")).status_code == 404
        assert (await alice.delete(f"/workspace/{slug}")).status_code == 400, "an unknown slug is 400 there"
        remade = (await alice.post("/workspace/new", json={"name": name})).json()["workspace"]
        assert remade["slug"] == slug
        assert (await alice.get(f"/workspace/{slug}")).json()["workspace"][0]["documents"] == [], "none left"


async def test_upload_metadata_and_pinning_by_its_location(secured_server, workspace):  # noqa: F811
    """``document/upload``'s ``metadata`` field (a JSON string), and ``update-pin`` with its ``location``."""
    await make_workspace(secured_server, "alice", workspace)
    await make_workspace(secured_server, "bob", workspace)
    meta = {"title": "Sales plan", "docAuthor": "Ana", "description": "Q3", "docSource": "crm", "other": "x"}
    async with api(secured_server) as alice, api(secured_server, "bob") as bob:
        uploaded = await alice.post(
            "/document/upload",
            files={"file": ("plan.txt", b"The sales plan names Lisbon.", "text/plain")},
            data={"addToWorkspaces": workspace, "metadata": json.dumps(meta)},
        )
        assert uploaded.status_code == 200, uploaded.text
        document = uploaded.json()["documents"][0]
        assert {k: document[k] for k in ("title", "docAuthor", "description", "docSource")} == {
            k: meta[k] for k in ("title", "docAuthor", "description", "docSource")
        }
        assert "other" not in document
        refused = await alice.post(
            "/document/upload",
            files={"file": ("b.txt", b"x", "text/plain")},
            data={"addToWorkspaces": workspace, "metadata": json.dumps({"title": 3})},
        )
        assert refused.status_code == 400 and "title" in refused.json()["error"]

        pin = {"docPath": document["location"], "pinStatus": True}
        assert (await bob.post(f"/workspace/{workspace}/update-pin", json=pin)).status_code == 404
        pinned = await alice.post(f"/workspace/{workspace}/update-pin", json=pin)
        assert pinned.status_code == 200 and pinned.json() == {"message": "Pin status updated successfully"}
        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert [(d["docpath"], d["pinned"], json.loads(d["metadata"])["title"]) for d in held] == [
            (document["location"], True, "Sales plan")
        ]
        unknown = await alice.post(
            f"/workspace/{workspace}/update-pin", json={"docPath": "nope", "pinStatus": True}
        )
        assert unknown.status_code == 404
        bad = await alice.post(f"/workspace/{workspace}/update-pin", json={**pin, "pinStatus": "yes"})
        assert bad.status_code == 400
        unpinned = await alice.post(
            f"/workspace/{workspace}/update-pin", json={"docPath": document["location"]}
        )
        assert unpinned.status_code == 200
        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert held[0]["pinned"] is False, "pinStatus defaults to false, as there"


async def test_raw_text_becomes_a_document_under_its_title(secured_server, workspace):  # noqa: F811
    """``document/raw-text``: the text is stored under ``metadata.title``; a title and a text are required."""
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        body = {"textContent": "Heron hours are 9 to 5.", "metadata": {"title": "hours.txt"}}
        made = await alice.post("/document/raw-text", json={**body, "addToWorkspaces": workspace})
        assert made.status_code == 200, made.text
        document = made.json()["documents"][0]
        assert made.json()["success"] is True and document["title"] == "hours.txt"
        assert document["workspaces"][0]["outcome"] == "added"
        found = await alice.post(f"/workspace/{workspace}/vector-search", json={"query": "Heron hours"})
        assert any("9 to 5" in hit["text"] for hit in found.json()["results"]), found.text
        for bad, says in [
            ({"textContent": "x", "metadata": {}}, "title"),
            ({"textContent": "", "metadata": {"title": "t"}}, "textContent"),
        ]:
            refused = await alice.post("/document/raw-text", json={**bad, "addToWorkspaces": workspace})
            assert refused.status_code == 422 and says in refused.json()["error"], refused.text
        elsewhere = await alice.post(
            "/document/raw-text", json={**body, "addToWorkspaces": "no-such-workspace"}
        )
        assert elsewhere.status_code == 404
