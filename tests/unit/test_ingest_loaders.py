"""Reading documents: every supported type gives its text; a damaged or empty file gives a clear reason."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from workspace_agent.skills.documents import linear_tables, metadata_header, split_text
from workspace_agent.skills.loaders import UnreadableDocument, content_hash, extract_text


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of the given object bodies (numbered from 1, the first the catalog) with a correct xref table."""
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def make_pdf(text: str) -> bytes:
    """A minimal one-page PDF showing ``text`` in Helvetica."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
            b" /Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )


def make_docx(*paragraphs: str) -> bytes:
    from docx import Document

    doc = Document()
    for p in paragraphs:
        doc.add_paragraph(p)
    table = doc.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "plan", "price"
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def test_plain_text_and_markdown_are_read_as_they_are():
    assert extract_text(Path("a.md"), "# Title\n\nbody é".encode()) == "# Title\n\nbody é"
    assert extract_text(Path("a.txt"), "\ufeffwith bom".encode()) == "with bom"
    assert extract_text(Path("a.txt"), "caf\xe9".encode("latin-1")) == "café"


def test_html_keeps_the_text_and_drops_scripts_and_styles():
    html = (
        b"<html><head><style>p{}</style><script>var x=1</script></head><body><h1>Hi</h1><p>there</p></body>"
    )
    assert extract_text(Path("page.html"), html) == "Hi\nthere"


def test_pdf_and_docx_give_their_text():
    assert "Lanternfish uptime" in extract_text(Path("a.pdf"), make_pdf("Lanternfish uptime"))
    text = extract_text(Path("a.docx"), make_docx("first paragraph", "second paragraph"))
    assert "first paragraph\nsecond paragraph" in text and "plan | price" in text


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "PDF"),
        ("broken.docx", b"not a zip", "DOCX"),
        ("empty.md", b"   \n", "no text"),
        ("blob.txt", b"\x00\x01\x02binary", "binary"),
        ("image.png", b"\x89PNG", "unsupported file type .png"),
    ],
)
def test_unreadable_files_say_why(name, data, reason):
    with pytest.raises(UnreadableDocument, match=reason):
        extract_text(Path(name), data)


def test_chunks_respect_size_and_overlap_and_the_header_names_the_document():
    text = " ".join(f"word{i}" for i in range(400))
    chunks = split_text(text, chunk_size=200, chunk_overlap=20)
    assert len(chunks) > 5 and all(len(c) <= 200 for c in chunks)
    assert chunks[0].split()[-1] in chunks[1], "neighbouring chunks share their overlap"
    header = metadata_header("guide.md", "/docs/guide.md")
    assert header == "<document_metadata>\nsourceDocument: guide.md\n</document_metadata>\n\n", (
        "a file's place on the server is never in the prompt"
    )
    page = metadata_header("News", "https://example.org/news")
    assert "source: https://example.org/news\n" in page, "a web page's address is, as in AnythingLLM"
    assert content_hash(b"a") != content_hash(b"b") and len(content_hash(b"a")) == 64


def test_markdown_tables_reach_the_model_one_row_a_line_with_each_cell_named():
    text = (
        "Plans:\n\n| Plan | Price | Pages |\n|:-----|------:|---|\n| Hobby | free | 1 |\n"
        "| Team | 12 EUR \\| month |  |\n\nAfter the table."
    )
    assert linear_tables(text) == (
        "Plans:\n\nPlan: Hobby; Price: free; Pages: 1\nPlan: Team; Price: 12 EUR | month\n\nAfter the table."
    ), "an empty cell is left out, an escaped pipe is a pipe, the text around stays"
    cut = "| Team | 12 EUR | 5 |\n| Business | 49 EUR | unlimited |"
    assert linear_tables(cut) == cut, "rows whose header a chunk boundary cut off cannot be named: kept"
    assert linear_tables("a | b, not a table\nnext") == "a | b, not a table\nnext"
