"""``web_search`` against each provider's real response shape, served from loopback (issue 20, item 3).

The shapes follow the providers' public API documentation: SearXNG's ``/search?format=json``, Tavily's
``POST /search``, Brave's ``/res/v1/web/search`` and DuckDuckGo's HTML page (``a.result__a`` links wrapped
as ``//duckduckgo.com/l/?uddg=...``, ``.result__snippet`` text, ads marked ``result--ad``).
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import parse_qs, quote

import pytest

from tests.support.helpers import user_message
from tests.support.web_server import Answer, WebServer
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills import web_search as ws
from workspace_agent.skills.web_search import web_search_tools

SETTINGS = [
    "WEB_SEARCH_PROVIDER",
    "SEARXNG_URL",
    "TAVILY_API_KEY",
    "TAVILY_URL",
    "BRAVE_SEARCH_API_KEY",
    "BRAVE_SEARCH_URL",
    "DUCKDUCKGO_URL",
    "WEB_SEARCH_MAX_RESULTS",
    "WEB_SEARCH_TIMEOUT",
]


def searxng(request):
    query = parse_qs(request.query)
    assert query["format"] == ["json"]
    body = {
        "query": query["q"][0],
        "number_of_results": 2,
        "results": [
            {
                "url": "https://widgets.example/pricing",
                "title": "Widget pricing",
                "content": "The widget costs 12 euros.",
                "engine": "duckduckgo",
                "parsed_url": ["https", "widgets.example", "/pricing", "", "", ""],
                "template": "default.html",
                "engines": ["duckduckgo", "brave"],
                "positions": [1, 2],
                "score": 2.5,
                "category": "general",
            },
            {"url": "https://other.example/", "title": "Other", "content": "Something else.", "score": 1.0},
        ],
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }
    return Answer(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def tavily(request):
    if request.headers.get("Authorization") != "Bearer tvly-test-key":
        return Answer(401, b'{"detail": {"error": "Unauthorized: missing or invalid API key."}}')
    sent = json.loads(request.body)
    body = {
        "query": sent["query"],
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": [
            {
                "title": "Widget pricing",
                "url": "https://widgets.example/pricing",
                "content": "The widget costs 12 euros.",
                "score": 0.81,
                "raw_content": None,
            }
        ][: sent["max_results"]],
        "response_time": 1.2,
    }
    return Answer(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def brave(request):
    if request.headers.get("X-Subscription-Token") != "brave-test-key":
        return Answer(422, b'{"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}')
    query = parse_qs(request.query)
    body = {
        "type": "search",
        "query": {"original": query["q"][0], "more_results_available": True},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
        "web": {
            "type": "search",
            "results": [
                {
                    "type": "search_result",
                    "title": "Widget pricing",
                    "url": "https://widgets.example/pricing",
                    "is_source_local": False,
                    "description": "The <strong>widget</strong> costs 12 euros.",
                    "profile": {"name": "Widgets", "url": "https://widgets.example/"},
                    "language": "en",
                    "family_friendly": True,
                }
            ],
            "family_friendly": True,
        },
    }
    return Answer(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def duckduckgo(request):
    assert parse_qs(request.body.decode())["q"] == ["widget price"]
    wrapped = "//duckduckgo.com/l/?uddg=" + quote("https://widgets.example/pricing?a=1&b=2", safe="")
    page = f"""<!DOCTYPE html><html><body><div class="serp__results"><div id="links" class="results">
<div class="result results_links results_links_deep result--ad">
<div class="links_main links_deep result__body">
<h2 class="result__title"><a rel="nofollow" class="result__a" href="https://ads.example/">Buy widgets</a></h2>
<a class="result__snippet" href="https://ads.example/">An ad.</a></div></div>
<div class="result results_links results_links_deep web-result ">
<div class="links_main links_deep result__body"><h2 class="result__title">
<a rel="nofollow" class="result__a" href="{wrapped}&amp;rut=abc">Widget <b>pricing</b></a>
</h2><div class="result__extras"><a class="result__url" href="{wrapped}">widgets.example/pricing</a></div>
<a class="result__snippet" href="{wrapped}">The <b>widget</b> costs 12 euros.</a></div></div>
</div></div></body></html>"""
    return Answer(body=page.encode(), headers={"Content-Type": "text/html; charset=UTF-8"})


@pytest.fixture
def provider_server(monkeypatch):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    routes = {"/search": searxng, "/tavily/search": tavily, "/res/v1/web/search": brave, "/html/": duckduckgo}
    server = WebServer(routes).start()
    yield server
    server.stop()


def configure(monkeypatch, server: WebServer, provider: str) -> None:
    monkeypatch.setenv("WEB_SEARCH_PROVIDER", provider)
    settings = {
        "searxng": {"SEARXNG_URL": server.url("/")},
        "tavily": {"TAVILY_API_KEY": "tvly-test-key", "TAVILY_URL": server.url("/tavily/search")},
        "brave": {
            "BRAVE_SEARCH_API_KEY": "brave-test-key",
            "BRAVE_SEARCH_URL": server.url("/res/v1/web/search"),
        },
        "duckduckgo": {"DUCKDUCKGO_URL": server.url("/html/")},
    }[provider]
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


async def search(query: str):
    (tool,) = web_search_tools()
    call = {
        "name": "web_search",
        "args": {"query": query},
        "id": f"c-{uuid.uuid4().hex[:6]}",
        "type": "tool_call",
    }
    return await tool.ainvoke(call)


@pytest.mark.parametrize("provider", ["searxng", "duckduckgo", "tavily", "brave"])
async def test_each_provider_gives_titles_urls_and_snippets_as_sources(
    provider_server, monkeypatch, provider
):
    configure(monkeypatch, provider_server, provider)
    message = await search("widget price")
    assert message.content.startswith('Web results for "widget price" (')
    assert "Widget pricing" in message.content and "The widget costs 12 euros." in message.content
    first = message.artifact["sources"][0]
    expected = "https://widgets.example/pricing" + ("?a=1&b=2" if provider == "duckduckgo" else "")
    assert first["url"] == first["document"] == expected
    assert first["title"] == "Widget pricing" and first["text"] == "The widget costs 12 euros."
    assert "ads.example" not in message.content
    assert provider_server.requests, "the provider was asked"


async def test_results_are_capped_by_the_setting(provider_server, monkeypatch):
    configure(monkeypatch, provider_server, "searxng")
    monkeypatch.setenv("WEB_SEARCH_MAX_RESULTS", "1")
    message = await search("widget")
    assert len(message.artifact["sources"]) == 1 and "[2]" not in message.content


@pytest.mark.parametrize(
    ("settings", "offered"),
    [
        ({}, False),
        ({"WEB_SEARCH_PROVIDER": "altavista"}, False),
        ({"WEB_SEARCH_PROVIDER": "searxng"}, False),
        ({"WEB_SEARCH_PROVIDER": "tavily"}, False),
        ({"WEB_SEARCH_PROVIDER": "brave"}, False),
        ({"WEB_SEARCH_PROVIDER": "duckduckgo"}, True),
        ({"WEB_SEARCH_PROVIDER": "SearXNG", "SEARXNG_URL": "http://search.internal"}, True),
    ],
)
def test_not_offered_without_a_configured_provider(provider_server, monkeypatch, settings, offered):
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert [t.name for t in web_search_tools()] == (["web_search"] if offered else [])


async def test_a_provider_failure_is_a_clear_error_without_the_key(provider_server, monkeypatch):
    configure(monkeypatch, provider_server, "tavily")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-wrong-key")
    with pytest.raises(ws.SearchError) as caught:
        await search("widget")
    assert "401" in str(caught.value) and "tvly-wrong-key" not in str(caught.value)


def test_duckduckgo_links_are_unwrapped():
    assert (
        ws.unwrap("//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2Fx%3Fy%3D1&rut=z")
        == "https://a.example/x?y=1"
    )
    assert ws.unwrap("https://b.example/") == "https://b.example/"


async def test_the_agent_searches_and_cites_the_results(
    llm, saver, workspace, thread, provider_server, monkeypatch
):
    configure(monkeypatch, provider_server, "searxng")
    graph = build_graph(checkpointer=saver, tools=web_search_tools())
    llm.push(
        tool_reply(("web_search", {"query": "widget price"})), text_reply("12 euros, says widgets.example.")
    )
    context = Context(workspace=workspace, auto_approved=["web_search"])
    out = await graph.ainvoke(user_message("@agent how much is a widget?"), thread, context=context)
    assert out["stop_reason"] == "answered"
    assert [s["url"] for s in out["sources"] if s.get("url")] == [
        "https://widgets.example/pricing",
        "https://other.example/",
    ]
    (answer,) = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert (
        "[1] Widget pricing\nhttps://widgets.example/pricing\nThe widget costs 12 euros." in answer["content"]
    )
