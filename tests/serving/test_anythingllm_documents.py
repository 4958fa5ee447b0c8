"""Issue 37, item 2: AnythingLLM's document routes, as an integration written from its openapi.json uses them.

The round trip of AnythingLLM's swagger examples: upload a file to the library (``document/upload`` with no
workspace), find it (``GET documents``, ``documents/folder/custom-documents``, ``document/{docName}``), embed
it into a workspace by its ``location`` (``update-embeddings``), search and chat over it, pin it, take it out
of the workspace, and remove it for good (``system/remove-documents``). Raw text and a link come in the same
way. Each expected shape is read from AnythingLLM's source (``Mintplex-Labs/anything-llm``):

- ``server/endpoints/api/document/index.js``: the routes, ``{success, error, documents}``, the 422 of
  ``validateWorkspaceSlugQuery``, ``{"localFiles": ...}``, ``{"document": ...}``;
- ``server/utils/files/index.js``: ``viewLocalFiles``, ``getDocumentsByFolder`` (``folder documents
  totalCount hasMore error``, its 404 words), ``fileToPickerData`` and ``REQUIRED_FILE_OBJECT_FIELDS``;
- ``collector/processSingleFile/convert/asTxt.js``, ``collector/processRawText/index.js``,
  ``collector/processLink/convert/generic.js`` and ``collector/utils/files/index.js``: a document's fields,
  its name ``<name>-<uuid>.json`` and its ``location`` ``custom-documents/<name>``;
- ``server/endpoints/api/workspace/index.js``: ``update-embeddings`` answers ``{"workspace"}``
  (``Workspace.get``: with ``documents``, ``contextWindow``, ``currentContextTokenCount``), an unknown slug
  400;
- ``server/endpoints/api/system/index.js``: ``remove-documents`` answers ``{success, message}``.

Each user has a library of their own: bob can neither list, read, embed nor remove alice's documents.
"""

from __future__ import annotations

import re
import uuid

import openai
import pytest

from tests.security.conftest import KEYS, secured_server  # noqa: F401 - the keyed dev server
from tests.serving.conftest import keyed_served_url, serving_env  # noqa: F401 - the Aegra fixtures
from tests.serving.test_anythingllm_api import api, events, make_workspace, prompt_text
from workspace_agent.samples.scripted_model import text_reply

#: ``REQUIRED_FILE_OBJECT_FIELDS`` of ``server/utils/files/index.js``, and what ``fileToPickerData`` and
#: ``viewLocalFiles`` add to them.
PICKER_FIELDS = {
    "name",
    "type",
    "id",
    "url",
    "title",
    "docAuthor",
    "description",
    "docSource",
    "chunkSource",
    "published",
    "wordCount",
    "token_count_estimate",
    "cached",
    "canWatch",
    "pinnedWorkspaces",
    "watched",
}
#: The collector's document (``asTxt.js`` ``data`` with ``writeToServerDocuments``' two keys).
UPLOADED_FIELDS = {
    "id",
    "url",
    "title",
    "docAuthor",
    "description",
    "docSource",
    "chunkSource",
    "published",
    "wordCount",
    "pageContent",
    "token_count_estimate",
    "location",
    "isDirectUpload",
}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
PLAN = b"The Osprey plan costs 31 EUR a month and includes the harbour map."


def fresh() -> str:
    """A new workspace name, for the checks run again under Aegra."""
    return f"ws-{uuid.uuid4().hex[:8]}"


async def test_the_library_round_trip(secured_server, llm, workspace):  # noqa: F811
    """Upload to the library, list and read it, embed it by location, chat over it, pin, drop, remove it."""
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        uploaded = await alice.post(
            "/document/upload", files={"file": ("osprey plan.txt", PLAN, "text/plain")}
        )
        assert uploaded.status_code == 200, uploaded.text
        answer = uploaded.json()
        assert answer["success"] is True and answer["error"] is None
        document = answer["documents"][0]
        assert UPLOADED_FIELDS <= set(document), document
        assert re.fullmatch(rf"custom-documents/osprey-plan\.txt-{UUID}\.json", document["location"])
        assert document["location"].endswith(f"-{document['id']}.json")
        assert document["pageContent"] == PLAN.decode() and document["wordCount"] == len(PLAN.split())
        assert isinstance(document["token_count_estimate"], int) and document["token_count_estimate"] > 0
        assert document["docSource"] == "a text file uploaded by the user." and document["workspaces"] == []
        location, name = document["location"], document["location"].split("/", 1)[1]

        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert held == [], "no addToWorkspaces: the library only, as there"

        listed = (await alice.get("/documents")).json()["localFiles"]
        assert listed["name"] == "documents" and listed["type"] == "folder"
        folder = next(f for f in listed["items"] if f["name"] == "custom-documents")
        item = next(i for i in folder["items"] if i["name"] == name)
        assert set(item) == PICKER_FIELDS, item
        assert item["type"] == "file" and item["id"] == document["id"] and item["pinnedWorkspaces"] == []

        paged = await alice.get("/documents/folder/custom-documents")
        assert paged.status_code == 200
        page = paged.json()
        assert set(page) == {"folder", "documents", "totalCount", "hasMore", "error"}
        assert page["folder"] == "custom-documents" and page["error"] is None and page["hasMore"] is False
        assert name in [d["name"] for d in page["documents"]] and page["totalCount"] == len(page["documents"])
        by_query = await alice.get("/documents", params={"folder": "custom-documents", "limit": 1})
        assert by_query.json()["code"] == 200 and len(by_query.json()["documents"]) == 1
        missing = await alice.get("/documents/folder/no-such-folder")
        assert (
            missing.status_code == 404
            and missing.json()["error"] == 'Folder "no-such-folder" does not exist.'
        )

        one = await alice.get(f"/document/{name}")
        assert one.status_code == 200 and one.json()["document"]["title"] == "osprey plan.txt"
        assert "pageContent" not in one.json()["document"]
        assert (await alice.get("/document/nothing-here.json")).status_code == 404

        embedded = await alice.post(f"/workspace/{workspace}/update-embeddings", json={"adds": [location]})
        assert embedded.status_code == 200, embedded.text
        record = embedded.json()["workspace"]
        assert {"documents", "contextWindow", "currentContextTokenCount", "slug"} <= set(record)
        assert [d["docpath"] for d in record["documents"]] == [location]

        found = await alice.post(f"/workspace/{workspace}/vector-search", json={"query": "Osprey plan price"})
        assert any("31 EUR" in hit["text"] for hit in found.json()["results"]), found.text
        llm.reset()
        llm.push(text_reply("It costs 31 EUR a month."))
        said = await alice.post(
            f"/workspace/{workspace}/chat",
            json={"message": "What does the Osprey plan cost?", "mode": "query"},
        )
        assert said.json()["textResponse"] == "It costs 31 EUR a month."
        assert "31 EUR" in prompt_text(llm.requests[-1]), "the embedded document reached the model"

        pinned = await alice.post(
            f"/workspace/{workspace}/update-pin", json={"docPath": location, "pinStatus": True}
        )
        assert pinned.status_code == 200
        listed = (await alice.get("/documents")).json()["localFiles"]["items"][0]["items"]
        workspace_id = record["id"]
        assert next(i for i in listed if i["name"] == name)["pinnedWorkspaces"] == [workspace_id]

        dropped = await alice.post(f"/workspace/{workspace}/update-embeddings", json={"deletes": [location]})
        assert dropped.json()["workspace"]["documents"] == []
        assert (await alice.get(f"/document/{name}")).status_code == 200, "still in the library"

        again = await alice.post(f"/workspace/{workspace}/update-embeddings", json={"adds": [location]})
        assert len(again.json()["workspace"]["documents"]) == 1
        removed = await alice.request("DELETE", "/system/remove-documents", json={"names": [location]})
        assert removed.status_code == 200
        assert removed.json() == {"success": True, "message": "Documents removed successfully"}
        assert (await alice.get(f"/document/{name}")).status_code == 404
        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert held == [], "removed from the system: out of every workspace too"
        found = await alice.post(f"/workspace/{workspace}/vector-search", json={"query": "Osprey plan price"})
        assert "31 EUR" not in found.text


async def test_raw_text_and_a_link_go_to_the_library_and_the_named_workspace(
    secured_server,  # noqa: F811
    linked_site,
    workspace,
):
    """``raw-text`` and ``upload-link`` name their documents as the collector does, and embed where asked."""
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        text = {"textContent": "Heron hours are 9 to 5.", "metadata": {"title": "Opening Hours.md"}}
        made = await alice.post("/document/raw-text", json={**text, "addToWorkspaces": workspace})
        assert made.status_code == 200, made.text
        document = made.json()["documents"][0]
        assert re.fullmatch(rf"custom-documents/raw-opening-hours-{UUID}\.json", document["location"])
        assert document["title"] == "opening-hours.txt" and document["docAuthor"] == "no author specified"
        assert document["workspaces"][0]["outcome"] == "added"
        twice = await alice.post("/document/raw-text", json={**text, "addToWorkspaces": workspace})
        assert twice.json()["documents"][0]["location"] == document["location"]
        assert twice.json()["documents"][0]["workspaces"][0]["outcome"] == "unchanged"

        link = linked_site.url("/help/refunds.html")
        fetched = await alice.post(
            "/document/upload-link",
            json={"link": link, "addToWorkspaces": workspace, "metadata": {"docAuthor": "Support"}},
        )
        assert fetched.status_code == 200, fetched.text
        page = fetched.json()["documents"][0]
        assert re.fullmatch(
            rf"custom-documents/url-127\.0\.0\.1_help_refunds\.html-{UUID}\.json", page["location"]
        )
        assert page["chunkSource"] == f"link://{link}" and page["docAuthor"] == "Support"
        assert "14 days" in page["pageContent"] and "<p>" not in page["pageContent"]
        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert sorted(d["docpath"] for d in held) == sorted([document["location"], page["location"]])


async def test_bad_bodies_get_a_reason_and_change_nothing(secured_server, workspace):  # noqa: F811
    """Wrong types, a private address, headers for the fetch, an unknown workspace: refused, saying why."""
    await make_workspace(secured_server, "alice", workspace)
    async with api(secured_server) as alice:
        for body, status, says in [
            ({"adds": "custom-documents/x.json"}, 400, "adds"),
            ({"deletes": [1, 2]}, 400, "deletes"),
        ]:
            refused = await alice.post(f"/workspace/{workspace}/update-embeddings", json=body)
            assert refused.status_code == status and says in refused.text, refused.text
        unknown = await alice.post("/workspace/no-such-workspace/update-embeddings", json={"adds": []})
        assert unknown.status_code == 400 and unknown.content == b"", "as there: 400, no body"
        nowhere = await alice.request("DELETE", "/system/remove-documents", json={"names": "x"})
        assert nowhere.status_code == 400 and "names" in nowhere.text
        listed = await alice.post(
            "/document/raw-text",
            json={"textContent": "x", "metadata": {"title": "t"}, "addToWorkspaces": [workspace]},
        )
        assert listed.status_code == 422 and "addToWorkspaces must be a string" in listed.json()["error"]

        private = await alice.post("/document/upload-link", json={"link": "http://127.0.0.1:9/admin"})
        assert private.status_code == 422 and "refused" in private.json()["error"], private.text
        metadata = await alice.post("/document/upload-link", json={"link": "http://169.254.169.254/latest/"})
        assert metadata.status_code == 422 and "refused" in metadata.json()["error"]
        headers = await alice.post(
            "/document/upload-link",
            json={"link": "https://example.org", "scraperHeaders": {"Authorization": "Bearer x"}},
        )
        assert headers.status_code == 400 and "scraperHeaders" in headers.json()["error"]
        for link in (None, 42, "", ["https://example.org"]):
            bad = await alice.post("/document/upload-link", json={"link": link})
            assert bad.status_code == 400 and "link" in bad.json()["error"]
        held = (await alice.get(f"/workspace/{workspace}")).json()["workspace"][0]["documents"]
        assert held == []


async def test_a_library_is_its_users_own(secured_server, workspace):  # noqa: F811
    """Bob cannot list, read, embed or remove alice's documents, even knowing their locations."""
    await make_workspace(secured_server, "alice", workspace)
    await make_workspace(secured_server, "bob", workspace)
    async with api(secured_server) as alice, api(secured_server, "bob") as bob:
        made = await alice.post(
            "/document/raw-text",
            json={"textContent": "Alice's salary is 9100.", "metadata": {"title": "salary"}},
        )
        location = made.json()["documents"][0]["location"]
        name = location.split("/", 1)[1]

        listed = (await bob.get("/documents")).json()["localFiles"]["items"]
        assert name not in str(listed)
        assert (await bob.get(f"/document/{name}")).status_code == 404
        added = await bob.post(f"/workspace/{workspace}/update-embeddings", json={"adds": [location]})
        assert added.status_code == 200 and added.json()["workspace"]["documents"] == []
        found = await bob.post(f"/workspace/{workspace}/vector-search", json={"query": "salary"})
        assert "9100" not in found.text
        await bob.request("DELETE", "/system/remove-documents", json={"names": [location]})
        assert (await alice.get(f"/document/{name}")).status_code == 200, "bob's removal touched only his own"
        stranger = await api(secured_server, None).__aenter__()
        try:
            assert (await stranger.get("/documents")).status_code == 403
        finally:
            await stranger.aclose()


async def test_documents_under_make_serve(keyed_served_url, llm):  # noqa: F811
    """The same routes from ``make serve`` (Aegra), where they are mounted the same way."""
    await test_the_library_round_trip(keyed_served_url, llm, fresh())
    await test_a_library_is_its_users_own(keyed_served_url, fresh())
    await an_integration(keyed_served_url, llm)


async def an_integration(url: str, llm) -> None:
    """What an integration written from AnythingLLM's openapi.json examples does, through ``/api/v1`` only.

    Create a workspace, upload a file, embed it by its location, pin it, chat in a session, stream in it,
    read the session's history newest first, then delete the workspace.
    """
    async with api(url) as alice:
        assert (await alice.get("/auth")).json() == {"authenticated": True}
        made = await alice.post(
            "/workspace/new", json={"name": f"Crm {uuid.uuid4().hex[:6]}", "openAiHistory": 20}
        )
        assert made.status_code == 200, made.text
        slug = made.json()["workspace"]["slug"]
        file = {
            "file": ("harbour-hours.txt", b"The harbour office opens at 07:30 on weekdays.", "text/plain")
        }
        uploaded = (await alice.post("/document/upload", files=file)).json()["documents"][0]
        location = uploaded["location"]
        embedded = await alice.post(
            f"/workspace/{slug}/update-embeddings", json={"adds": [location], "deletes": []}
        )
        assert [d["docpath"] for d in embedded.json()["workspace"]["documents"]] == [location]
        pin = await alice.post(f"/workspace/{slug}/update-pin", json={"docPath": location, "pinStatus": True})
        assert pin.json() == {"message": "Pin status updated successfully"}

        llm.reset()
        llm.push(text_reply("At 07:30."), text_reply("On weekdays."))
        said = await alice.post(
            f"/workspace/{slug}/chat",
            json={"message": "When does the harbour office open?", "mode": "chat", "sessionId": "crm-7"},
        )
        assert said.json()["textResponse"] == "At 07:30." and said.json()["type"] == "textResponse"
        assert "07:30" in prompt_text(llm.requests[-1]), "the pinned document went with the message"
        streamed = await alice.post(
            f"/workspace/{slug}/stream-chat",
            json={"message": "Which days?", "mode": "chat", "sessionId": "crm-7"},
        )
        chunks = events(streamed.text)
        assert chunks[-1]["type"] == "finalizeResponseStream" and chunks[-1]["chatId"] is not None
        assert "".join(c.get("textResponse") or "" for c in chunks if c["type"] == "textResponseChunk") == (
            "On weekdays."
        )
        history = await alice.get(
            f"/workspace/{slug}/chats", params={"apiSessionId": "crm-7", "limit": 1, "orderBy": "desc"}
        )
        assert [i["content"] for i in history.json()["history"]] == ["Which days?", "On weekdays."]

        assert (await alice.delete(f"/workspace/{slug}")).status_code == 200
        assert (await alice.get(f"/workspace/{slug}")).json() == {"workspace": []}
        assert (await alice.get(f"/document/{location.split('/', 1)[1]}")).status_code == 200, (
            "the library keeps the file, as AnythingLLM's documents outlive a workspace"
        )


async def test_an_integration_from_the_openapi_examples(secured_server, llm):  # noqa: F811
    await an_integration(secured_server, llm)


async def test_the_openai_routes_answer_where_anythingllm_serves_them(secured_server, llm, workspace):  # noqa: F811
    """``/api/v1/openai/models`` and ``chat/completions`` (``server/endpoints/api/openai/index.js``).

    The same OpenAI-compatible routes as ``/v1``, for clients configured with AnythingLLM's path.
    """
    await make_workspace(secured_server, "alice", workspace)
    client = openai.AsyncOpenAI(
        base_url=f"{secured_server}/api/v1/openai", api_key=KEYS["alice"], max_retries=0
    )
    models = await client.models.list()
    assert workspace in [m.id for m in models.data] and all(m.object == "model" for m in models.data)
    llm.reset()
    llm.push(text_reply("Lisbon."))
    reply = await client.chat.completions.create(
        model=workspace, messages=[{"role": "user", "content": "Where is the sales plan set?"}]
    )
    assert reply.choices[0].message.content == "Lisbon." and reply.model == workspace
    stranger = openai.AsyncOpenAI(base_url=f"{secured_server}/api/v1/openai", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await stranger.models.list()
