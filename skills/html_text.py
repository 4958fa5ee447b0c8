"""The readable text of an HTML page, in time linear in its size, whatever its markup.

Pages come from strangers: ``fetch_url``'s pages, a search provider's results, a person's upload. Python's
own ``html.parser`` (what BeautifulSoup used here) is quadratic on unclosed tags: an 80 KB page of ``<p>x``
took 19 s and a page under the 5 MB fetch cap more than five minutes. libxml2's HTML parser (through
``lxml``) closes such tags as a browser does and stops descending at 256 levels, so both a flat page of
200,000 open paragraphs and 100,000 nested ``<div>`` read in well under a second. The tree is then walked
by lxml's iterator, never by recursion in Python.

This module parses; it does not bound. Callers run it in a worker process under CPU and memory limits
(``skills.extraction``), so a page that still finds a slow path is killed with its worker.
"""

from __future__ import annotations

import codecs

from lxml import html as lxml_html
from lxml.etree import ParserError, iterwalk, strip_elements

#: Tags whose text is no part of what a document says, wherever it comes from.
SCRIPT_TAGS = ("script", "style", "noscript", "template")
#: Tags of a web page's furniture besides scripts: menus, footers, forms, embedded frames and drawings.
PAGE_NOISE_TAGS = (*SCRIPT_TAGS, "svg", "canvas", "iframe", "nav", "footer", "form")
#: Tags that end a line of text: without breaks after them a page's paragraphs run together.
BLOCK_TAGS = frozenset(
    "p div br li tr h1 h2 h3 h4 h5 h6 section article header pre blockquote dd dt table ul ol".split()
)


def decode(data: bytes, charset: str | None) -> str:
    """``data`` as text in ``charset`` when that names a text encoding, else UTF-8; bad bytes replaced.

    A server declares whatever it likes: ``charset=rot13`` names a codec Python knows that is not a text
    encoding, and an unknown name none at all. Neither may turn a readable page into an error.
    """
    if charset:
        try:
            if codecs.lookup(charset)._is_text_encoding:
                return data.decode(charset, errors="replace")
        except (LookupError, ValueError):
            pass
    return data.decode("utf-8", errors="replace")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_html(data: bytes, charset: str | None) -> lxml_html.HtmlElement:
    """The page's element tree, comments and processing instructions left out.

    With a declared charset the bytes are decoded here (see :func:`decode`); without one, bytes that are
    valid UTF-8 are read as UTF-8, and others are left to libxml2, which reads the page's ``<meta charset>``.
    """
    options = {"remove_comments": True, "remove_pis": True, "default_doctype": False}
    if not charset and _is_utf8(data):
        charset = "utf-8"  # what nearly every page without a declaration is; libxml2 would guess Latin-1
    if charset:
        parser = lxml_html.HTMLParser(**options, encoding="utf-8")
        source = decode(data, charset).encode("utf-8")
    else:
        parser, source = lxml_html.HTMLParser(**options), data
    try:
        return lxml_html.document_fromstring(source, parser=parser)
    except ParserError:  # nothing but whitespace or markup that holds no element
        return lxml_html.Element("html")


def words(text: str | None) -> str:
    """The text with every run of whitespace one space: markup's line breaks are not the writer's."""
    return " ".join((text or "").split())


def _title(root: lxml_html.HtmlElement) -> str:
    """The page's ``<title>``, else its ``og:title``, else its first ``<h1>``."""
    title = root.find(".//title")
    if title is not None and words(title.text_content()):
        return words(title.text_content())
    meta = root.find(".//meta[@property='og:title']")
    if meta is not None and words(meta.get("content")):
        return words(meta.get("content"))
    heading = root.find(".//h1")
    return words(heading.text_content()) if heading is not None else ""


def _lines(element: lxml_html.HtmlElement) -> list[str]:
    """The element's text, one block a line, spaces collapsed, empty lines dropped."""
    parts: list[str] = []
    for event, node in iterwalk(element, events=("start", "end")):
        if event == "start":
            parts.append(node.text or "")
            continue
        if node.tag in BLOCK_TAGS:
            parts.append("\n")
        if node is not element:
            parts.append(node.tail or "")
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return [line for line in lines if line]


def page_text(
    data: bytes, charset: str | None = None, noise: tuple[str, ...] = PAGE_NOISE_TAGS
) -> tuple[str, str]:
    """The title and readable text of a web page: ``noise`` dropped, its ``<main>`` or ``<article>`` if any.

    Args:
        data: The page's bytes.
        charset: The encoding the server declared, if any.
        noise: Tags dropped with everything inside them.
    """
    root = parse_html(data, charset)
    title = _title(root)
    strip_elements(root, *noise, with_tail=False)
    body = root.find(".//main")
    for fallback in ("article", "body"):
        body = body if body is not None else root.find(f".//{fallback}")
    return title, "\n".join(_lines(root if body is None else body))


def document_text(data: bytes) -> str:
    """The whole text of an uploaded HTML document: only scripts and styles dropped (it is not a web page)."""
    _, text = page_text(data, None, SCRIPT_TAGS)
    return text
