"""``fetch_url`` reads public pages and is never a door into the server's network (issue 20, item 2).

A loopback server stands in for the web; it is reachable only because the test names it in
``FETCH_ALLOWED_HOSTS``. Every other loopback, private, link-local or mapped address is refused, before a
request is sent and after every redirect, and so is every scheme but http(s) and every URL with credentials.
"""

from __future__ import annotations

import gzip
import socket
import time
import uuid

import pytest

from tests.support.helpers import user_message
from tests.support.web_server import Answer, WebServer
from tests.unit.test_ingest_loaders import make_pdf
from workspace_agent.core.context import Context
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply
from workspace_agent.skills import web
from workspace_agent.skills.web import address_refusal, fetch_url_tool, web_tools

HTML = b"""<!doctype html><html><head><title>Pricing of the Widget</title>
<script>var secret = "never shown";</script><style>body{color:red}</style></head>
<body><nav>Home | About</nav><main><h1>Widget pricing</h1><p>The widget costs <b>12 euros</b> a month.</p>
<ul><li>Support included</li><li>Cancel any time</li></ul></main><footer>Copyright</footer></body></html>"""
LONG_TEXT = "\n".join(f"Paragraph {i}: the quick brown fox jumps over the lazy dog." for i in range(4000))


def routes(server_port: list[int]) -> dict:
    def to(path: str, status: int = 302):
        return lambda _r: Answer(status, headers={"Location": path})

    def hop(request):
        n = int(request.query.split("=")[1])
        return Answer(302, headers={"Location": f"/hop?n={n - 1}" if n > 1 else "/page.html"})

    return {
        "/page.html": lambda _r: Answer(body=HTML, headers={"Content-Type": "text/html; charset=utf-8"}),
        "/notes.txt": lambda _r: Answer(body=b"Plain notes: 42.", headers={"Content-Type": "text/plain"}),
        "/doc.pdf": lambda _r: Answer(
            body=make_pdf("Quarterly figures in a PDF"), headers={"Content-Type": "application/pdf"}
        ),
        "/zipped.html": lambda _r: Answer(
            body=gzip.compress(HTML), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}
        ),
        "/bomb": lambda _r: Answer(
            body=gzip.compress(b"a" * 20_000_000),
            headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"},
        ),
        "/long.txt": lambda _r: Answer(body=LONG_TEXT.encode(), headers={"Content-Type": "text/plain"}),
        "/big": lambda _r: Answer(headers={"Content-Type": "text/plain"}, chunks=[b"x" * 65536] * 40),
        "/declared-big": lambda _r: Answer(body=b"y" * 300_000, headers={"Content-Type": "text/plain"}),
        "/slow": lambda _r: Answer(body=b"late", headers={"Content-Type": "text/plain"}, delay=5),
        "/binary": lambda _r: Answer(body=b"\x00\x01", headers={"Content-Type": "application/octet-stream"}),
        "/missing": lambda _r: Answer(404, b"gone"),
        "/hop": hop,
        "/loop": to("/loop"),
        "/to-page": to("/page.html", 301),
        "/to-other-loopback": lambda _r: Answer(
            302, headers={"Location": f"http://127.0.0.2:{server_port[0]}/page.html"}
        ),
        "/to-metadata": to("http://169.254.169.254/latest/meta-data/"),
        "/to-file": to("file:///etc/passwd"),
        "/to-localhost": lambda _r: Answer(
            302, headers={"Location": f"http://localhost:{server_port[0]}/page.html"}
        ),
    }


@pytest.fixture
def site(monkeypatch):
    port: list[int] = []
    server = WebServer(routes(port)).start()
    port.append(server.port)
    monkeypatch.setenv("FETCH_ALLOWED_HOSTS", f"127.0.0.1:{server.port}")
    for name in ("FETCH_MAX_BYTES", "FETCH_TIMEOUT", "FETCH_MAX_REDIRECTS"):
        monkeypatch.delenv(name, raising=False)
    yield server
    server.stop()


async def call(url: str):
    """The tool as the graph runs it: a tool call in, a ToolMessage (content and artifact) out."""
    call_id = f"call-{uuid.uuid4().hex[:8]}"
    return await fetch_url_tool().ainvoke(
        {"name": "fetch_url", "args": {"url": url}, "id": call_id, "type": "tool_call"}
    )


async def refused(url: str) -> str:
    with pytest.raises(web.FetchError) as caught:
        await call(url)
    return str(caught.value)


# ── what it reads ─────────────────────────────────────────────────────────────────────────────────────


async def test_an_html_page_becomes_readable_text_and_a_source(site):
    message = await call(site.url("/page.html"))
    assert message.content.startswith(f"Pricing of the Widget\n{site.url('/page.html')}\n")
    assert "The widget costs 12 euros a month." in message.content
    assert "Support included\nCancel any time" in message.content
    for noise in ("never shown", "color:red", "Home | About", "Copyright"):
        assert noise not in message.content
    (source,) = message.artifact["sources"]
    assert source["url"] == source["document"] == site.url("/page.html")
    assert source["title"] == "Pricing of the Widget"
    assert "12 euros" in source["text"]


async def test_plain_text_pdf_and_compressed_pages_are_read(site):
    assert "Plain notes: 42." in (await call(site.url("/notes.txt"))).content
    pdf = await call(site.url("/doc.pdf"))
    assert "Quarterly figures in a PDF" in pdf.content
    assert pdf.artifact["sources"][0]["title"] == site.url("/doc.pdf")
    assert "12 euros" in (await call(site.url("/zipped.html"))).content


async def test_redirects_within_the_cap_are_followed_and_the_final_url_cited(site):
    message = await call(site.url("/hop?n=3"))
    assert "12 euros" in message.content
    assert f"(redirected from {site.url('/hop?n=3')})" in message.content
    assert message.artifact["sources"][0]["url"] == site.url("/page.html")


async def test_a_page_longer_than_its_share_of_the_window_is_cut_and_says_so():
    text = LONG_TEXT
    shown, note = web.fit_to_share(text, 8192)
    assert note is not None and len(shown) < len(text)
    assert note == (
        f"[cut: {len(shown):,} of {len(text):,} characters shown; the page is longer than fetch_url's share "
        "of the context window (30% of 8,192 tokens)]"
    )
    assert shown.startswith("Paragraph 0:")
    assert web.fit_to_share("short page", 8192) == ("short page", None)


async def test_the_cut_follows_the_running_turns_window(site):
    message = await call(site.url("/long.txt"))
    assert "[cut: " in message.content and f"of {len(LONG_TEXT):,} characters shown" in message.content
    source = message.artifact["sources"][0]
    assert source["characters"] == len(LONG_TEXT) > source["shown"]


# ── caps ──────────────────────────────────────────────────────────────────────────────────────────────


async def test_too_many_redirects_are_refused_by_the_setting(site, monkeypatch):
    monkeypatch.setenv("FETCH_MAX_REDIRECTS", "2")
    assert "12 euros" in (await call(site.url("/hop?n=2"))).content
    message = await refused(site.url("/hop?n=3"))
    assert "redirected more than 2 times" in message and "FETCH_MAX_REDIRECTS" in message
    assert "FETCH_MAX_REDIRECTS" in await refused(site.url("/loop"))


@pytest.mark.parametrize("path", ["/big", "/declared-big", "/bomb"])
async def test_too_many_bytes_are_refused_by_the_setting(site, monkeypatch, path):
    monkeypatch.setenv("FETCH_MAX_BYTES", "100000")
    message = await refused(site.url(path))
    assert "larger than 100,000 bytes" in message and "FETCH_MAX_BYTES" in message


async def test_a_slow_page_is_given_up_by_the_setting(site, monkeypatch):
    monkeypatch.setenv("FETCH_TIMEOUT", "0.5")
    started = time.monotonic()
    message = await refused(site.url("/slow"))
    assert time.monotonic() - started < 2
    assert "within 0.5 s" in message and "FETCH_TIMEOUT" in message


async def test_a_bad_setting_is_named(site, monkeypatch):
    monkeypatch.setenv("FETCH_MAX_BYTES", "lots")
    assert "FETCH_MAX_BYTES" in await refused(site.url("/page.html"))


async def test_unreadable_and_failed_pages_say_why(site):
    assert "application/octet-stream" in await refused(site.url("/binary"))
    assert "404" in await refused(site.url("/missing"))


# ── the hostile cases ─────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("127.0.0.3", "loopback"),
        ("169.254.169.254", "link-local"),
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::ffff:169.254.169.254]", "link-local"),
        ("10.0.0.7", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("[fc00::1]", "private"),
        ("[fe80::1]", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not a public address"),
        ("[2002:7f00:1::]", "loopback"),
        ("[64:ff9b::7f00:1]", "loopback"),
        ("2130706433", "loopback"),
        ("0x7f000001", "loopback"),
        ("localhost", "loopback"),
    ],
)
async def test_the_servers_own_network_is_refused(site, host, kind):
    server_requests = len(site.requests)
    message = await refused(f"http://{host}:{site.port}/page.html")
    assert "refused" in message and kind in message and "FETCH_ALLOWED_HOSTS" in message
    assert len(site.requests) == server_requests, "nothing was sent"


async def test_loopback_on_a_port_not_allowed_is_refused(site):
    assert "loopback" in await refused(f"http://127.0.0.1:{site.port + 1}/")
    assert "loopback" in await refused("http://127.0.0.1/")


@pytest.mark.parametrize("path", ["/to-other-loopback", "/to-metadata", "/to-localhost"])
async def test_a_redirect_into_the_network_is_refused_at_that_hop(site, path):
    message = await refused(site.url(path))
    assert "refused" in message and ("loopback" in message or "link-local" in message)
    assert [r.path for r in site.requests] == [path], "the refused hop was never requested"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file:///etc/passwd", "not file"),
        ("ftp://example.com/file", "not ftp"),
        ("gopher://127.0.0.1:70/", "not gopher"),
        ("http://user:secret@127.0.0.1/", "user name or password"),
        ("https://user@example.com/", "user name or password"),
        ("not a url", "only http and https"),
    ],
)
async def test_other_schemes_and_credentials_are_refused(url, words):
    assert words in await refused(url)


async def test_a_redirect_to_another_scheme_is_refused(site):
    assert "not file" in await refused(site.url("/to-file"))


async def test_the_address_checked_is_the_address_connected_to(site, monkeypatch):
    """DNS rebinding: a name that answers public for the check and loopback after is resolved only once."""
    monkeypatch.setenv("FETCH_TIMEOUT", "1")
    real = socket.getaddrinfo
    answers = []

    def rebinding(host, *args, **kwargs):
        if host == "rebind.example":
            first = not answers
            answers.append(host)
            return real("93.184.215.14" if first else "127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with pytest.raises(web.FetchError):
        await call(f"http://rebind.example:{site.port}/page.html")
    assert answers == ["rebind.example"] and site.requests == []


def test_address_kinds():
    assert address_refusal("93.184.215.14") is None
    assert address_refusal("2606:2800:220:1:248:1893:25c8:1946") is None
    assert "link-local" in address_refusal("169.254.169.254")
    assert "loopback" in address_refusal("::ffff:7f00:1")


# ── through the real graph ────────────────────────────────────────────────────────────────────────────


async def test_the_agent_reads_a_page_and_cites_it(llm, saver, workspace, thread, site):
    graph = build_graph(checkpointer=saver, tools=web_tools())
    url = site.url("/page.html")
    llm.push(tool_reply(("fetch_url", {"url": url})), text_reply("It costs 12 euros a month."))
    context = Context(workspace=workspace, auto_approved=["fetch_url"])
    out = await graph.ainvoke(user_message(f"@agent what does {url} say?"), thread, context=context)
    assert out["stop_reason"] == "answered"
    assert [s["url"] for s in out["sources"] if s.get("url")] == [url]
    answer = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "The widget costs 12 euros a month." in answer[0]["content"]


async def test_the_agent_is_told_why_a_hostile_url_was_refused(llm, saver, workspace, thread, site):
    graph = build_graph(checkpointer=saver, tools=web_tools())
    llm.push(tool_reply(("fetch_url", {"url": "http://169.254.169.254/latest/meta-data/"})), text_reply("no"))
    context = Context(workspace=workspace, auto_approved=["fetch_url"])
    out = await graph.ainvoke(user_message("@agent read the metadata"), thread, context=context)
    (answer,) = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "169.254.169.254 is a link-local address" in answer["content"]
    assert not [s for s in out["sources"] if s.get("url")]
    assert site.requests == []
