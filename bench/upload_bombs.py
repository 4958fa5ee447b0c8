"""Another user's ordinary turn while upload bombs are refused, against the same turn with no bombs.

Issue 19, finding 2: on ``make serve``, six 30 kB uploads made another user's turn take 163 s instead of
2 s. Here a server is started (``langgraph dev``; ``make serve`` too when ``.venv-serve`` exists), the
scripted OpenAI-compatible server answers every model call, and per configuration:

- *quiet*: ``--turns`` ordinary chat turns, one after another, each on a fresh thread;
- *bombs*: ``--bombs`` runs on other threads each upload a bomb (DOCX zip bombs that unpack to 200 MB and
  PDFs whose 2000 pages share one content stream, alternately), then the same ordinary turns.

It prints the median and worst turn of each, their ratio, and how long the bombs took to be refused.

Run: ``.venv/bin/python bench/upload_bombs.py [--configs dev,serve1] [--turns 5] [--bombs 6]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import os
import statistics
import tempfile
import time
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any

from langgraph_sdk.client import LangGraphClient
from serve_load import ROOT, client_for, served_env, start_dev, start_serve, stop

from workspace_agent.samples.scripted_model import ScriptedLLM, text_reply

PDF, DOCX = "application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx_bomb(unpacked_mb: int = 200) -> bytes:
    """A minimal DOCX whose ``word/document.xml`` unpacks to ``unpacked_mb`` MB of paragraphs."""
    types = (
        '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="r1" Target="word/document.xml" Type="http://schemas.openxmlformats.org/'
        'officeDocument/2006/relationships/officeDocument"/></Relationships>'
    )
    paragraphs = b"<w:p><w:r><w:t>All work and no play makes a dull document.</w:t></w:r></w:p>" * 16384
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", types)
        z.writestr("_rels/.rels", rels)
        with z.open("word/document.xml", "w", force_zip64=True) as member:
            member.write(f'<w:document xmlns:w="{W}"><w:body>'.encode())
            for _ in range(unpacked_mb * 2**20 // len(paragraphs)):
                member.write(paragraphs)
            member.write(b"</w:body></w:document>")
    return out.getvalue()


def pdf_bomb(pages: int = 2000) -> bytes:
    """A PDF of ``pages`` pages that all show one compressed content stream of 2000 words."""
    packed = zlib.compress(b"BT /F1 12 Tf 72 720 Td " + b"(ferry pier ) Tj " * 2000 + b"ET", 9)
    page = b"<</Type/Page/Parent 2 0 R/Contents 3 0 R/Resources<</Font<</F1 4 0 R>>>>/MediaBox[0 0 612 792]>>"
    bodies = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Count %d/Kids[%s]>>" % (pages, b" ".join(b"%d 0 R" % (5 + n) for n in range(pages))),
        b"<</Length %d/Filter/FlateDecode>>stream\n%s\nendstream" % (len(packed), packed),
        b"<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
    ] + [page] * pages
    body, where = bytearray(b"%PDF-1.4\n"), []
    for n, obj in enumerate(bodies, start=1):
        where.append(len(body))
        body += b"%d 0 obj %s endobj\n" % (n, obj)
    table = b"".join(b"%010d 00000 n \n" % w for w in where)
    tail = b"trailer<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF" % (len(bodies) + 1, len(body))
    return bytes(body) + b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1) + table + tail


def upload_message(name: str, mime: str, data: bytes) -> dict:
    """A user message carrying one file as Agent Chat UI sends it."""
    block = {"type": "file", "mime_type": mime, "source_type": "base64", "metadata": {"filename": name}}
    return {"messages": [{"role": "user", "content": [{**block, "data": base64.b64encode(data).decode()}]}]}


async def ordinary_turns(client: LangGraphClient, context: dict, turns: int) -> list[float]:
    """Seconds each of ``turns`` ordinary chat turns takes, each on a fresh thread."""
    took = []
    for i in range(turns):
        thread = (await client.threads.create())["thread_id"]
        started = time.perf_counter()
        message = {"messages": [{"role": "user", "content": f"When does ferry {i} leave?"}]}
        out = await client.runs.wait(thread, "agent", input=message, context=context)
        took.append(time.perf_counter() - started)
        assert out.get("stop_reason") == "answered", out
    return took


async def measure(url: str, turns: int, bombs: int) -> dict[str, Any]:
    """The quiet turns, then the same turns while ``bombs`` bomb uploads run; and the bombs' outcomes."""
    client = client_for(url)
    context = {"workspace": f"bombs-{uuid.uuid4().hex[:8]}", "chat_mode": "chat"}
    quiet = await ordinary_turns(client, context, turns)
    files = [("bomb.docx", DOCX, docx_bomb()), ("bomb.pdf", PDF, pdf_bomb())]
    started, runs = time.perf_counter(), []
    for i in range(bombs):
        name, mime, data = files[i % 2]
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            thread, "agent", input=upload_message(name, mime, data), context=context
        )
        runs.append((thread, run["run_id"]))
    loud = await ordinary_turns(client, context, turns)
    outcomes = []
    for thread, run in runs:
        await client.runs.join(thread, run)
        uploads = (await client.threads.get_state(thread))["values"].get("uploads") or []
        outcomes += [u["outcome"] for u in uploads]
    refused_in = time.perf_counter() - started
    await client.http.client.aclose()
    return {"quiet": quiet, "bombs": loud, "outcomes": outcomes, "refused_in": refused_in}


def report(name: str, result: dict[str, Any]) -> None:
    """Print the medians, the worst turns and their ratio."""
    quiet, loud = result["quiet"], result["bombs"]
    q, b = statistics.median(quiet), statistics.median(loud)
    print(f"{name}:")
    print(f"  ordinary turn, no bombs:   median {q:6.2f} s, worst {max(quiet):6.2f} s")
    print(f"  ordinary turn, with bombs: median {b:6.2f} s, worst {max(loud):6.2f} s")
    print(f"  ratio (median, bombs / none): {b / q:.2f}")
    done = result["refused_in"]
    print(f"  bomb uploads: {result['outcomes']}, all done {done:.1f} s after the first was sent")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="dev,serve1" if (ROOT / ".venv-serve").exists() else "dev")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--bombs", type=int, default=6)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="upload-bombs-"))
    os.environ["WORKSPACE_AGENT_HOME"] = str(home)
    from workspace_agent.checkpoints.embedded import database_url, stop_embedded

    db_url = database_url()
    llm = ScriptedLLM(rule=lambda request: text_reply("The ferry leaves at nine.")).start()
    env = served_env(db_url, llm.base_url)
    starters = {
        "dev": ("langgraph dev", lambda log: start_dev(env, log)),
        "serve1": ("make serve, 1 instance", lambda log: start_serve(env, log, 1)),
    }
    try:
        for key in args.configs.split(","):
            name, start = starters[key]
            proc, urls = start(home / f"{key}.log")
            try:
                report(name, asyncio.run(measure(urls[0], args.turns, args.bombs)))
            finally:
                stop(proc)
    finally:
        llm.stop()
        stop_embedded()


if __name__ == "__main__":
    main()
