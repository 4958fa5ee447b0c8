"""``fetch_url`` reads one web page (AnythingLLM's web-scraping skill) and is never a door into the server.

The model names the URL, and a page it reads may name the next one, so every URL is the client's word. Each
hop, the first and every redirect, is checked before anything is sent: only ``http`` and ``https``, no
credentials in the URL, and a host whose every resolved address is public. The request then goes to the
address that was checked (the URL carries the IP; the ``Host`` header and TLS server name carry the host
name), so a name that resolves to a public address for the check and to ``127.0.0.1`` a moment later (DNS
rebinding) cannot swap it. Redirects are followed here, one checked hop at a time, never by httpx; proxies
from the environment are not used, since a proxy would connect wherever the page says.

Settings (deployment: environment or ``langgraph.json`` env), read at each call:
    ``FETCH_MAX_BYTES``: the most bytes one page may have, after decompression (default 5,000,000).
    ``FETCH_TIMEOUT``: seconds one fetch may take, all hops together (default 20).
    ``FETCH_MAX_REDIRECTS``: redirects followed at most (default 5).
    ``FETCH_ALLOWED_HOSTS``: comma-separated host names or ``host:port`` reachable even when they resolve
        to a private or loopback address (an intranet wiki, a test server). Nothing is allowed by default.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from langchain_core.tools import BaseTool, StructuredTool

from ..providers.tokens import encoding
from .document_tools import live_settings
from .extraction import extract_bounded, page_bounded
from .html_text import decode
from .loaders import UnreadableDocument

MAX_BYTES_SETTING, TIMEOUT_SETTING = "FETCH_MAX_BYTES", "FETCH_TIMEOUT"
REDIRECTS_SETTING, ALLOWED_SETTING = "FETCH_MAX_REDIRECTS", "FETCH_ALLOWED_HOSTS"
DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, DEFAULT_MAX_REDIRECTS = 5_000_000, 20.0, 5
#: The share of the model's context window one page may take; the rest is the conversation's.
PAGE_SHARE = 0.30
#: A token is rarely longer than this many characters: only this much text is tokenized to find a cut.
MAX_CHARS_PER_TOKEN = 16
#: Characters of a page's opening kept in its citation.
SOURCE_OPENING = 500
SCHEMES = ("http", "https")
REDIRECT_CODES = {301, 302, 303, 307, 308}
HTML_TYPES = {"text/html", "application/xhtml+xml"}
TEXT_TYPES = {"application/json", "application/xml", "application/ld+json"}
PDF_TYPES = {"application/pdf", "application/x-pdf"}
USER_AGENT = "workspace-agent/0.1 (fetch_url)"
#: No connection is kept for the next hop: connections are pooled by address, and two host names on one
#: address (a CDN) would otherwise share a TLS connection made for the first name.
ONE_USE = httpx.Limits(max_keepalive_connections=0)


class FetchError(RuntimeError):
    """A page that was not read: refused, over a limit, or not readable; the message says which and why."""


@dataclass(frozen=True)
class FetchLimits:
    """What one fetch may take; read from the deployment's settings at each call."""

    max_bytes: int
    timeout: float
    max_redirects: int


@dataclass(frozen=True)
class Page:
    """A page as fetched: where it ended up, what it says it is, and its (decompressed) bytes."""

    url: httpx.URL
    requested: str
    content_type: str
    charset: str | None
    body: bytes


# ── settings ───────────────────────────────────────────────────────────────────────────────────────────


def _setting(name: str, default: float, minimum: float) -> float:
    """A numeric deployment setting of at least ``minimum``, or ``default`` when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = minimum - 1
    if not minimum <= value < float("inf"):
        raise FetchError(
            f"the deployment setting {name} must be a number of at least {minimum:g}, got {raw!r}"
        )
    return value


def fetch_limits() -> FetchLimits:
    """The caps of this deployment: ``FETCH_MAX_BYTES``, ``FETCH_TIMEOUT``, ``FETCH_MAX_REDIRECTS``.

    Raises:
        FetchError: A setting is not a number in range; the message names it.
    """
    return FetchLimits(
        max_bytes=int(_setting(MAX_BYTES_SETTING, DEFAULT_MAX_BYTES, 1)),
        timeout=_setting(TIMEOUT_SETTING, DEFAULT_TIMEOUT, 0.001),
        max_redirects=int(_setting(REDIRECTS_SETTING, DEFAULT_MAX_REDIRECTS, 0)),
    )


def allowed_hosts() -> set[str]:
    """``FETCH_ALLOWED_HOSTS`` as lower-case ``host`` and ``host:port`` entries (IPv6 hosts in brackets)."""
    return {item.strip().lower() for item in os.environ.get(ALLOWED_SETTING, "").split(",") if item.strip()}


def _host_entry(url: httpx.URL) -> str:
    host = url.raw_host.decode("ascii").lower()
    return f"[{host}]" if ":" in host else host


def is_allowed(url: httpx.URL, allowed: set[str]) -> bool:
    """Whether the deployment names this URL's host (alone, or with this URL's port)."""
    host = _host_entry(url)
    port = url.port or (443 if url.scheme == "https" else 80)
    return host in allowed or f"{host}:{port}" in allowed


# ── which addresses are the server's own network ───────────────────────────────────────────────────────


def address_refusal(address: str) -> str | None:
    """Why the server must not connect to this address, or ``None`` for a public one.

    IPv6 forms that carry an IPv4 address (mapped ``::ffff:a.b.c.d``, 6to4, NAT64) are judged by that IPv4
    address, so ``[::ffff:127.0.0.1]`` is loopback. Anything not globally routable is refused, named by its
    kind where it has one.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.ip_network("64:ff9b::/96"):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            reason = address_refusal(str(embedded))
            return f"{ip} carries {reason}" if reason else None
    kinds = [
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address (cloud metadata services live there)"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
        (not ip.is_global, "not a public address"),
    ]
    return next((f"{ip} is {kind}" for hit, kind in kinds if hit), None)


async def resolve_checked(url: httpx.URL, allowed: set[str]) -> str:
    """The address to connect to for this URL, after checking every address its host resolves to.

    All of them are checked, not just the first: a name answering with one public and one private address
    is refused. The deployment's allowed hosts skip the check (but are still connected to by address).

    Raises:
        FetchError: The host does not resolve, or resolves to an address of the server's own network.
    """
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchError(f"the host {host!r} could not be resolved ({exc})") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchError(f"the host {host!r} has no address")
    if not is_allowed(url, allowed):
        for address in addresses:
            reason = address_refusal(address)
            if reason:
                raise FetchError(
                    f"refused {url.scheme}://{_host_entry(url)}:{port}: {reason}. fetch_url reads public web "
                    f"pages only; the deployment can allow a host in {ALLOWED_SETTING}"
                )
    return addresses[0]


def checked_url(given: str | httpx.URL) -> httpx.URL:
    """A URL the tool may request: ``http``/``https``, with a host, without credentials.

    Raises:
        FetchError: The URL is malformed, of another scheme, or carries a user name or password.
    """
    try:
        url = given if isinstance(given, httpx.URL) else httpx.URL(given.strip())
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise FetchError(f"{given!r} is not a valid URL ({exc})") from exc
    if url.scheme not in SCHEMES:
        raise FetchError(f"only http and https URLs are fetched, not {url.scheme or 'a URL without scheme'}:")
    if url.userinfo:
        raise FetchError("URLs with a user name or password are not fetched")
    if not url.raw_host:
        raise FetchError(f"{given!r} names no host")
    return url


# ── one hop, then the chain ────────────────────────────────────────────────────────────────────────────


def _decoder(content_encoding: str) -> Callable[[bytes, int], bytes]:
    """A decompressor for the response's ``Content-Encoding`` that never yields more than it is asked.

    httpx would inflate a whole network chunk at once; a gzip bomb makes that a thousand times the cap.
    """
    name = content_encoding.strip().lower()
    if name in ("", "identity"):
        return lambda chunk, _room: chunk
    if name in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32).decompress  # 32: a gzip or a zlib header
    raise FetchError(f"the page is sent with the {name!r} encoding, which fetch_url does not decode")


async def read_capped(
    response: httpx.Response, max_bytes: int, setting: str = MAX_BYTES_SETTING, what: str = "page"
) -> bytes:
    """The response body, decompressed here, stopped as soon as it passes ``max_bytes``.

    Raises:
        FetchError: The body declares or reaches more than ``max_bytes``; the message names ``setting``.
    """
    too_big = f"the {what} is larger than {max_bytes:,} bytes, the most one request may read ({setting})"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes and not response.headers.get("content-encoding"):
        raise FetchError(too_big)
    decode = _decoder(response.headers.get("content-encoding", ""))
    body = bytearray()
    try:
        async for chunk in response.aiter_raw():
            body += decode(chunk, max_bytes - len(body) + 1)
            if len(body) > max_bytes:
                raise FetchError(too_big)
    except zlib.error as exc:
        raise FetchError(f"the page's compressed body is damaged ({exc})") from exc
    return bytes(body)


async def _hop(client: httpx.AsyncClient, url: httpx.URL, limits: FetchLimits) -> httpx.URL | Page:
    """Request one checked URL at its checked address; the next URL for a redirect, else the page."""
    address = await resolve_checked(url, allowed_hosts())
    target = url.copy_with(host=address, fragment=None)
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
    headers = {"Host": url.netloc.decode("ascii"), "Accept-Encoding": "gzip, deflate, identity"}
    async with client.stream("GET", target, headers=headers, extensions=extensions) as response:
        location = response.headers.get("location")
        if response.status_code in REDIRECT_CODES and location:
            try:
                return url.join(location)
            except httpx.InvalidURL as exc:
                raise FetchError(f"the page redirects to an invalid URL {location!r}") from exc
        if response.status_code >= 400:
            raise FetchError(f"the server answered {response.status_code} {response.reason_phrase}")
        body = await read_capped(response, limits.max_bytes)
        content_type = response.headers.get("content-type", "")
        return Page(
            url=url.copy_with(fragment=None),
            requested="",
            content_type=content_type.split(";", 1)[0].strip().lower(),
            charset=response.charset_encoding,
            body=body,
        )


async def fetch(given: str) -> Page:
    """GET a URL, following at most ``FETCH_MAX_REDIRECTS`` redirects, each hop checked before it is sent.

    Raises:
        FetchError: Refused, over a cap (bytes, time, redirects), or the server failed; the message says
            which, and names the setting for a cap.
    """
    limits = fetch_limits()
    url = checked_url(given)
    timeout = httpx.Timeout(limits.timeout)
    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "text/html, text/plain;q=0.9, application/pdf;q=0.8, */*;q=0.1",
    }
    try:
        async with (
            asyncio.timeout(limits.timeout),
            httpx.AsyncClient(trust_env=False, timeout=timeout, headers=headers, limits=ONE_USE) as client,
        ):
            for _ in range(limits.max_redirects + 1):
                answer = await _hop(client, url, limits)
                if isinstance(answer, Page):
                    return replace(answer, requested=str(given).strip())
                url = checked_url(answer)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise FetchError(
            f"the page did not arrive within {limits.timeout:g} s, the most one fetch may take "
            f"({TIMEOUT_SETTING})"
        ) from exc
    except httpx.HTTPError as exc:
        raise FetchError(f"the page could not be fetched: {type(exc).__name__}: {exc}") from exc
    raise FetchError(
        f"the page redirected more than {limits.max_redirects} times, the most one fetch follows "
        f"({REDIRECTS_SETTING})"
    )


# ── bytes to readable text ─────────────────────────────────────────────────────────────────────────────


def _kind(page: Page) -> str:
    """``html``, ``text`` or ``pdf``: by the declared type, or by the bytes when the server did not say."""
    declared = page.content_type
    if declared in HTML_TYPES:
        return "html"
    if declared in PDF_TYPES or page.body.startswith(b"%PDF-"):
        return "pdf"
    if declared.startswith("text/") or declared in TEXT_TYPES or declared.endswith("+json"):
        return "text"
    if declared in ("", "application/octet-stream") and page.body.lstrip()[:15].lower().startswith(
        (b"<!doctype html", b"<html")
    ):
        return "html"
    raise FetchError(
        f"the page is {declared or 'of no declared type'}; fetch_url reads HTML, plain text and PDF"
    )


async def page_text(page: Page) -> tuple[str, str]:
    """The title (may be empty) and text of a fetched page.

    HTML and PDF go through the documents' bounded extraction (a worker process under ``EXTRACT_*`` limits,
    killed when the call is given up): a page can be markup or a PDF crafted to take minutes or gigabytes,
    and work in one of the server's threads could be neither stopped nor kept from the other turns. Plain
    text is only decoded, linear in the byte cap.

    Raises:
        FetchError: The type is not readable, or the page holds no text.
    """
    kind = _kind(page)
    try:
        if kind == "html":
            title, text = await page_bounded(page.body, page.charset)
        elif kind == "pdf":
            title, text = "", await extract_bounded(Path("page.pdf"), page.body)
        else:
            title, text = "", decode(page.body, page.charset).replace("\x00", "")
    except UnreadableDocument as exc:
        raise FetchError(f"the {'PDF' if kind == 'pdf' else 'page'} could not be read: {exc}") from exc
    if not text.strip():
        raise FetchError("the page holds no readable text (it may be drawn by JavaScript)")
    return title, text.strip()


def fit_to_share(text: str, window: int) -> tuple[str, str | None]:
    """The text cut to :data:`PAGE_SHARE` of the window, and a note saying how much was shown, if cut.

    The opening is kept: a page states what it is about first, and its end is mostly links and footers.
    """
    budget = max(int(window * PAGE_SHARE), 1)
    head = text[: budget * MAX_CHARS_PER_TOKEN]
    tokens = encoding().encode(head, disallowed_special=())
    if len(tokens) <= budget and len(head) == len(text):
        return text, None
    kept = encoding().decode(tokens[:budget])
    note = (
        f"[cut: {len(kept):,} of {len(text):,} characters shown; the page is longer than fetch_url's share "
        f"of the context window ({PAGE_SHARE:.0%} of {window:,} tokens)]"
    )
    return kept, note


# ── the tool ───────────────────────────────────────────────────────────────────────────────────────────


async def fetch_url(url: str) -> tuple[str, dict[str, Any]]:
    """Read one public web page (HTML, plain text or PDF) at an http(s) URL; returns its title and text."""
    page = await fetch(url)
    window = live_settings().window
    title, text = await page_text(page)
    shown, note = await asyncio.to_thread(fit_to_share, text, window)
    address = str(page.url)
    title = title or address
    moved = f" (redirected from {page.requested})" if page.requested and page.requested != address else ""
    content = f"{title}\n{address}{moved}\n\n{shown}" + (f"\n\n{note}" if note else "")
    source = {
        "document": address,
        "title": title,
        "text": shown[:SOURCE_OPENING],
        "url": address,
        "characters": len(text),
        "shown": len(shown),
    }
    return content, {"sources": [source]}


def fetch_url_tool() -> BaseTool:
    """``fetch_url``: a request out of the server, so the approval policy should ask before it runs."""
    return StructuredTool.from_function(
        coroutine=fetch_url, name="fetch_url", response_format="content_and_artifact"
    )


def web_tools() -> list[BaseTool]:
    """The web-page tools to register beside the built-ins: ``fetch_url``."""
    return [fetch_url_tool()]
