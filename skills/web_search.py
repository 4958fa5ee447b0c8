"""``web_search`` (AnythingLLM's web-browsing skill): titles, URLs and snippets from the deployment's search.

The provider and its endpoint are the deployment's, never the model's or a run's, so its URL is trusted as
configured (it may well be a SearXNG on the local network) and needs no address check; the pages found are
read with ``fetch_url``, which does check. Without a provider the tool is not offered at all.

Settings (deployment: environment or ``langgraph.json`` env):
    ``WEB_SEARCH_PROVIDER``: ``searxng``, ``duckduckgo``, ``tavily`` or ``brave``; unset means no web search.
    ``SEARXNG_URL``: the SearXNG instance (its JSON API at ``/search?format=json`` must be enabled).
    ``TAVILY_API_KEY`` / ``BRAVE_SEARCH_API_KEY``: the keyed providers' keys.
    ``DUCKDUCKGO_URL``, ``TAVILY_URL``, ``BRAVE_SEARCH_URL``: other endpoints (defaults: the public ones).
    ``WEB_SEARCH_MAX_RESULTS``: results returned (default 5). ``WEB_SEARCH_TIMEOUT``: seconds (default 15).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from langchain_core.tools import BaseTool, StructuredTool

from .extraction import search_results_bounded
from .html_text import parse_html, words
from .loaders import UnreadableDocument
from .web import read_capped

PROVIDER_SETTING = "WEB_SEARCH_PROVIDER"
DEFAULT_URLS = {
    "duckduckgo": ("DUCKDUCKGO_URL", "https://html.duckduckgo.com/html/"),
    "tavily": ("TAVILY_URL", "https://api.tavily.com/search"),
    "brave": ("BRAVE_SEARCH_URL", "https://api.search.brave.com/res/v1/web/search"),
}
#: What each provider needs besides its name; without it the tool is not offered.
REQUIRED = {"searxng": "SEARXNG_URL", "tavily": "TAVILY_API_KEY", "brave": "BRAVE_SEARCH_API_KEY"}
DEFAULT_MAX_RESULTS, DEFAULT_TIMEOUT = 5, 15.0
#: A provider's answer larger than this is not a list of results.
MAX_ANSWER_BYTES = 2_000_000
USER_AGENT = "workspace-agent/0.1 (web_search)"
#: One tag of a snippet's markup: it stops at the next ``<``, so a run of unclosed ones stays linear.
TAG = re.compile(r"<[^<>]*>")
#: XPath for "the class attribute holds this word", as CSS's ``.name`` means it.
_HAS_CLASS = "contains(concat(' ', normalize-space(@class), ' '), ' {} ')"

log = logging.getLogger(__name__)


class SearchError(RuntimeError):
    """A search that gave no results list: the provider failed or answered in another shape."""


@dataclass(frozen=True)
class Result:
    """One search result, in every provider's words."""

    title: str
    url: str
    snippet: str
    score: float | None = None


Search = Callable[[httpx.AsyncClient, str, int], Awaitable[list[Result]]]


# ── settings ───────────────────────────────────────────────────────────────────────────────────────────


def configured_provider() -> str | None:
    """The deployment's provider, if it is known and has what it needs; ``None`` (logged why) otherwise."""
    name = os.environ.get(PROVIDER_SETTING, "").strip().lower()
    if not name:
        return None
    if name not in PROVIDERS:
        log.warning(
            "%s=%r is not a known provider (%s): web_search is off",
            PROVIDER_SETTING,
            name,
            ", ".join(PROVIDERS),
        )
        return None
    needed = REQUIRED.get(name)
    if needed and not os.environ.get(needed, "").strip():
        log.warning("%s=%s needs %s: web_search is off", PROVIDER_SETTING, name, needed)
        return None
    return name


def endpoint(provider: str) -> str:
    """The provider's URL: ``SEARXNG_URL``'s ``/search``, or the public endpoint unless overridden."""
    if provider == "searxng":
        return urljoin(os.environ["SEARXNG_URL"].strip().rstrip("/") + "/", "search")
    setting, default = DEFAULT_URLS[provider]
    return os.environ.get(setting, "").strip() or default


def _positive(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = 0
    if value <= 0:
        raise SearchError(f"the deployment setting {name} must be a positive number, got {raw!r}")
    return value


# ── the providers: each turns its own answer into results ──────────────────────────────────────────────


def plain(html: str) -> str:
    """Text of a snippet that may carry markup (Brave marks matches with ``<strong>``).

    Tags are cut by a pattern that never looks past the next ``<``, so the work is linear in the snippet.
    """
    return " ".join(unescape(TAG.sub(" ", html)).split())


async def _json(client: httpx.AsyncClient, request: httpx.Request) -> Any:
    async with client.stream(
        request.method, request.url, headers=request.headers, content=request.content
    ) as r:
        if r.status_code >= 400:
            raise SearchError(f"the search provider answered {r.status_code} {r.reason_phrase}")
        body = await read_capped(r, MAX_ANSWER_BYTES, "fixed", "search answer")
    try:
        return httpx.Response(200, content=body).json()
    except ValueError as exc:
        raise SearchError("the search provider did not answer with JSON") from exc


def scored_results(answer: dict[str, Any], limit: int) -> list[Result]:
    """``{"results": [{"title", "url", "content", "score"?}]}``, the shape SearXNG and Tavily share."""
    return [
        Result(str(r.get("title") or r["url"]), str(r["url"]), str(r.get("content") or ""), r.get("score"))
        for r in answer.get("results", [])[:limit]
        if isinstance(r, dict) and r.get("url")
    ]


async def searxng(client: httpx.AsyncClient, query: str, limit: int) -> list[Result]:
    """SearXNG's JSON API: ``{"results": [{"url", "title", "content"}, ...]}``."""
    answer = await _json(
        client, client.build_request("GET", endpoint("searxng"), params={"q": query, "format": "json"})
    )
    return scored_results(answer, limit)


async def tavily(client: httpx.AsyncClient, query: str, limit: int) -> list[Result]:
    """Tavily: POST ``{"query", "max_results"}`` → ``{"results": [{"title", "url", "content", "score"}]}``."""
    headers = {"Authorization": f"Bearer {os.environ['TAVILY_API_KEY'].strip()}"}
    request = client.build_request(
        "POST", endpoint("tavily"), json={"query": query, "max_results": limit}, headers=headers
    )
    answer = await _json(client, request)
    return scored_results(answer, limit)


async def brave(client: httpx.AsyncClient, query: str, limit: int) -> list[Result]:
    """Brave: GET ``?q=&count=`` → ``{"web": {"results": [{"title", "url", "description"}]}}``."""
    headers = {
        "X-Subscription-Token": os.environ["BRAVE_SEARCH_API_KEY"].strip(),
        "Accept": "application/json",
    }
    request = client.build_request(
        "GET", endpoint("brave"), params={"q": query, "count": limit}, headers=headers
    )
    answer = await _json(client, request)
    found = (answer.get("web") or {}).get("results", [])
    return [
        Result(plain(str(r.get("title") or r["url"])), str(r["url"]), plain(str(r.get("description") or "")))
        for r in found[:limit]
        if isinstance(r, dict) and r.get("url")
    ]


def unwrap(href: str) -> str:
    """DuckDuckGo's result link: its ``//duckduckgo.com/l/?uddg=<url>`` redirect unwrapped to the page."""
    parts = urlsplit(urljoin("https://duckduckgo.com/", href))
    if parts.path == "/l/" and "uddg" in (query := parse_qs(parts.query)):
        return query["uddg"][0]
    return urljoin("https://duckduckgo.com/", href)


def duckduckgo_results(page: bytes, charset: str | None, limit: int) -> list[Result]:
    """Results of DuckDuckGo's HTML page: ``a.result__a`` links and ``.result__snippet`` text, ads skipped.

    A page from outside: run it in a worker (``extraction.search_results_bounded``), as :func:`duckduckgo`
    does, never in the server's threads.
    """
    results = []
    root = parse_html(page, charset)
    for link in root.xpath(f"//a[{_HAS_CLASS.format('result__a')}]"):
        box = next((a for a in link.iterancestors() if "result" in (a.get("class") or "").split()), None)
        if box is not None and "result--ad" in (box.get("class") or "").split():
            continue
        url = unwrap(str(link.get("href") or ""))
        if urlsplit(url).scheme not in ("http", "https"):
            continue
        snippet = box.xpath(f".//*[{_HAS_CLASS.format('result__snippet')}]") if box is not None else []
        text = words(snippet[0].text_content()) if snippet else ""
        results.append(Result(words(link.text_content()) or url, url, text))
        if len(results) == limit:
            break
    return results


async def duckduckgo(client: httpx.AsyncClient, query: str, limit: int) -> list[Result]:
    """DuckDuckGo's HTML endpoint (no key): POST ``q=``, parse the result page."""
    async with client.stream("POST", endpoint("duckduckgo"), data={"q": query}) as response:
        if response.status_code >= 400:
            raise SearchError(f"DuckDuckGo answered {response.status_code} {response.reason_phrase}")
        body = await read_capped(response, MAX_ANSWER_BYTES, "fixed", "search answer")
    try:
        found = await search_results_bounded(body, response.charset_encoding, limit)
    except UnreadableDocument as exc:
        raise SearchError(f"DuckDuckGo's results page could not be read: {exc}") from exc
    return [Result(title, url, snippet) for title, url, snippet in found]


PROVIDERS: dict[str, Search] = {
    "searxng": searxng,
    "duckduckgo": duckduckgo,
    "tavily": tavily,
    "brave": brave,
}
NAMES = {"searxng": "SearXNG", "duckduckgo": "DuckDuckGo", "tavily": "Tavily", "brave": "Brave Search"}


# ── the tool ───────────────────────────────────────────────────────────────────────────────────────────


def as_text(query: str, provider: str, results: list[Result]) -> str:
    """The results as the model reads them: numbered, title, URL and snippet each."""
    if not results:
        return f'No web results for "{query}" ({NAMES[provider]}).'
    lines = [f'Web results for "{query}" ({NAMES[provider]}):']
    lines += [f"[{i}] {r.title}\n{r.url}\n{r.snippet}".rstrip() for i, r in enumerate(results, 1)]
    return "\n\n".join(lines)


def as_source(result: Result) -> dict[str, Any]:
    """A result as a citation of the turn (``sources``), the URL being the document."""
    source = {"document": result.url, "title": result.title, "text": result.snippet, "url": result.url}
    return source if result.score is None else {**source, "score": result.score}


async def web_search(query: str) -> tuple[str, dict[str, Any]]:
    """Search the web; returns the top results' titles, URLs and snippets. Read a page with fetch_url."""
    provider = configured_provider()
    if provider is None:
        raise SearchError(f"no web search provider is configured ({PROVIDER_SETTING})")
    limit = int(_positive("WEB_SEARCH_MAX_RESULTS", DEFAULT_MAX_RESULTS))
    timeout = _positive("WEB_SEARCH_TIMEOUT", DEFAULT_TIMEOUT)
    headers = {"User-Agent": USER_AGENT}
    async with httpx.AsyncClient(timeout=timeout, headers=headers, follow_redirects=False) as client:
        try:
            results = await PROVIDERS[provider](client, query, limit)
        except httpx.TimeoutException as exc:
            raise SearchError(
                f"{NAMES[provider]} did not answer within {timeout:g} s (WEB_SEARCH_TIMEOUT)"
            ) from exc
        except httpx.HTTPError as exc:
            raise SearchError(f"{NAMES[provider]} could not be reached: {type(exc).__name__}") from exc
        except (KeyError, TypeError, AttributeError) as exc:
            raise SearchError(f"{NAMES[provider]} answered in an unexpected shape ({exc!r})") from exc
    return as_text(query, provider, results), {"sources": [as_source(r) for r in results]}


def web_search_tools() -> list[BaseTool]:
    """``web_search`` when the deployment configured a provider, else nothing (so it is not offered).

    It sends the query out of the server, so the approval policy should ask before it runs.
    """
    if configured_provider() is None:
        return []
    return [
        StructuredTool.from_function(
            coroutine=web_search,
            name="web_search",
            response_format="content_and_artifact",
            metadata={"readOnlyHint": True},  # it changes nothing; approval asks all the same (policy)
        )
    ]
