"""Markup from outside cannot stall the server (issue 40, findings 1 and 8).

A fetched page, a search provider's results page and an uploaded HTML file are parsed by libxml2 (linear on
unclosed and deeply nested tags) in a worker process under the extraction limits, never in the server's
threads: the event loop stays free while a page is read, and a call given up takes its worker with it.
A page's declared charset is a stranger's word: one that is no text encoding is read with replacement.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from tests.security.test_fetch_url import call
from tests.support.web_server import Answer, WebServer
from workspace_agent.skills.html_text import page_text
from workspace_agent.skills.web_search import duckduckgo_results

#: Unclosed paragraphs, as old HTML writes them: Python's html.parser took 19 s for 20,000 of them.
UNCLOSED = b"<html><body>" + b"<p>x" * 200_000
#: Nesting as deep as a page can make it.
NESTED = b"<html><body>" + b"<div>" * 100_000 + b"deep"
#: A results page of unclosed result boxes, as a hostile or broken search provider might send.
RESULTS = b"<html><body>" + b'<div class="result"><a class="result__a" href="https://example.com/">x' * 50_000
#: CPU seconds each hostile page may take to parse: generous for a busy machine, far below a quadratic parse.
PARSE_CPU_SECONDS = 2.0


def cpu_seconds(work) -> float:
    """The processor time ``work()`` took in this process (a busy machine does not inflate it)."""
    start = time.process_time()
    work()
    return time.process_time() - start


@pytest.mark.parametrize("page", [UNCLOSED, NESTED], ids=["200k-unclosed-p", "100k-nested-div"])
def test_unclosed_and_nested_tags_parse_in_linear_time(page: bytes) -> None:
    assert cpu_seconds(lambda: page_text(page, "utf-8")) < PARSE_CPU_SECONDS


def test_a_hostile_search_results_page_parses_in_linear_time() -> None:
    found: list = []
    assert cpu_seconds(lambda: found.extend(duckduckgo_results(RESULTS, "utf-8", 5))) < PARSE_CPU_SECONDS
    assert [r.url for r in found] == ["https://example.com/"] * 5


@pytest.fixture
def site(monkeypatch):
    html = {"Content-Type": "text/html; charset=utf-8"}
    server = WebServer(
        {
            "/unclosed.html": lambda _r: Answer(body=b"<p>x" * 20_000, headers=html),
            "/huge.html": lambda _r: Answer(body=b"<p>x" * 1_200_000, headers=html),
            "/rot13.html": lambda _r: Answer(
                body=b"<p>caf\xc3\xa9 prices</p>", headers={"Content-Type": "text/html; charset=rot13"}
            ),
            "/rot13.txt": lambda _r: Answer(
                body=b"caf\xc3\xa9 notes", headers={"Content-Type": "text/plain; charset=rot13"}
            ),
            "/nonsense.txt": lambda _r: Answer(
                body=b"plain \xff notes", headers={"Content-Type": "text/plain; charset=no-such-charset"}
            ),
        }
    ).start()
    monkeypatch.setenv("FETCH_ALLOWED_HOSTS", f"127.0.0.1:{server.port}")
    yield server
    server.stop()


async def test_the_event_loop_stays_free_while_a_page_of_unclosed_tags_is_read(site) -> None:
    """Parsed in this process's threads, the page held the interpreter lock: the loop stalled 1.2-1.6 s."""
    lags: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before - 0.01)

    ticker = asyncio.create_task(tick())
    try:
        message = await call(site.url("/unclosed.html"))
    finally:
        ticker.cancel()
    assert max(lags) < 0.5, f"the event loop stalled {max(lags):.2f} s while the page was parsed"
    assert message.artifact["sources"][0]["characters"] == len("x\n" * 20_000) - 1  # every paragraph read


def extraction_workers() -> set[int]:
    """The extraction worker processes now running (children of this test process)."""
    import os

    found = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "-f", "workspace_agent.skills.extraction"],
        capture_output=True,
        text=True,
    )
    return {int(pid) for pid in found.stdout.split()}


async def test_a_page_given_up_takes_its_parse_with_it(site, monkeypatch) -> None:
    """``tool_timeout`` cancels the call; the parse must stop with it, not keep a core busy afterwards."""
    monkeypatch.setenv("FETCH_MAX_BYTES", "10000000")
    reading = asyncio.create_task(call(site.url("/huge.html")))
    deadline = time.monotonic() + 60
    while not extraction_workers():
        assert not reading.done(), "the page was read without a worker process"
        assert time.monotonic() < deadline, "no worker process started to parse the page"
        await asyncio.sleep(0.01)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    deadline = time.monotonic() + 10
    while extraction_workers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not extraction_workers(), "the worker kept parsing after its call was given up"


@pytest.mark.parametrize(
    ("path", "words"),
    [("/rot13.html", "café prices"), ("/rot13.txt", "café notes"), ("/nonsense.txt", "plain \ufffd notes")],
)
async def test_a_charset_that_is_no_text_encoding_is_read_with_replacement(site, path, words) -> None:
    message = await call(site.url(path))
    assert words in message.content
