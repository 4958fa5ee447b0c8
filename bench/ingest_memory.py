"""Peak memory of ingesting one text file with the local embedder, against the process before the ingest.

Each size runs in a fresh child process (``--child``), so one measurement never inherits another's heap or
ONNX Runtime arena. The child imports everything, loads the embedder and opens the database first; that RSS
is the baseline. It then ingests a generated plain-text file of the given size through the ``ingest`` graph,
into a scratch workspace removed afterwards, and reads the kernel's high-water mark (``VmHWM``). Printed:
baseline, peak, peak minus baseline, and peak / baseline.

Run: ``python bench/ingest_memory.py [--sizes 11000,2000000]`` (needs the ``local`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import common  # noqa: F401 - sets the bench environment

WORDS = (
    "harbour ferry pier ticket morning evening garden kitchen museum ship model river bridge station "
    "window door market bread water summer winter office printer network report meeting budget plan"
).split()


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` memory field in KiB (``VmRSS`` now, ``VmHWM`` the peak so far)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> None:
    """Make ``VmHWM`` start again from the current RSS (Linux ≥ 4.0), so set-up does not count as peak."""
    Path("/proc/self/clear_refs").write_text("5")


def write_text(path: Path, size: int) -> None:
    """Paragraphs of plausible words, ``size`` bytes in all."""
    rng = random.Random(7)
    parts, total = [], 0
    while total < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + ". "
        if rng.random() < 0.2:
            sentence += "\n\n"
        parts.append(sentence)
        total += len(sentence)
    path.write_text("".join(parts)[:size])


async def child(size: int) -> dict[str, float]:
    from workspace_agent.checkpoints.chunks import DocumentStore
    from workspace_agent.graphs.ingest import IngestContext, build_graph
    from workspace_agent.providers.embeddings import get_embeddings
    from workspace_agent.skills.documents import list_documents, remove_documents

    workspace = f"bench-mem-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.txt"
        write_text(path, size)
        graph = build_graph(document_roots=[folder])
        get_embeddings().embed_documents(["warm up the model"])
        await list_documents(workspace)  # opens the database pool
        reset_peak()
        baseline = status_kb("VmRSS")
        out = await graph.ainvoke({"paths": [str(path)]}, context=IngestContext(workspace=workspace))
        peak = status_kb("VmHWM")
        chunks = sum(e["chunks"] for e in out["added"])
        if out["failed"]:
            raise SystemExit(f"ingest failed: {out['failed']}")
        await remove_documents(workspace, [str(path)], DocumentStore())
    return {"size": size, "chunks": chunks, "baseline_mb": baseline / 1024, "peak_mb": peak / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="11000,2000000", help="file sizes in bytes, comma-separated")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(child(args.child))))
        return
    header = ("file", "chunks", "baseline MB", "peak MB", "peak-base MB", "peak/base")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (10, 7, 12, 8, 13, 10), strict=True)))
    for size in (int(s) for s in args.sizes.split(",")):
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(size)], capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise SystemExit(done.stderr or done.stdout)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        grew = r["peak_mb"] - r["baseline_mb"]
        print(
            f"{size:>10} {r['chunks']:>7} {r['baseline_mb']:>12.0f} {r['peak_mb']:>8.0f} {grew:>13.0f}"
            f" {r['peak_mb'] / r['baseline_mb']:>9.2f}x"
        )


if __name__ == "__main__":
    main()
