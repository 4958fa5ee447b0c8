"""How many threads should llama.cpp use? 1 against 2 (or more), on a quiet machine and beside busy processes.

On a busy 2-core machine llama.cpp with 2 threads was seen generating 4-6x slower than with 1: its threads
meet at a barrier after every step and spin there, so one descheduled thread stalls the others. This bench
measures that on this machine, so ``LOCAL_MODEL_THREADS``' default rests on figures.

Run as ``python bench/model_threads.py`` (``LOCAL_MODEL=0.5b`` for the smaller model; ``--threads 1,2``,
``--burners 3``, ``--runs 3``). One server per thread count is loaded at once (they map the same file, so the
weights are in memory once) and their requests alternate, so a change in what else runs on the machine hits
every thread count alike. A sample is one streamed request: llama.cpp's own timings give the prompt's read
rate and the generation rate, and generation stops after ``--tokens`` tokens or ``--sample-seconds``, so a
collapsed thread count costs bounded time. Each figure is printed with its ratio against 1 thread in the same
phase:

- quiet: nothing started by the bench (the load average says how quiet the machine really was),
- busy: ``--burners`` Python processes spinning on the CPU, started and stopped by the bench; each stops by
  itself after ``--burn-limit`` seconds, so none outlives a bench that was killed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from local_model import WORDS, _line, _timed

from workspace_agent.providers.local.local_model import LocalModelServer, resolve_model_path, thread_count

#: A burner: spin until the deadline it was given, whatever happens to the bench.
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def burners(count: int, seconds: float) -> Iterator[None]:
    """Keep ``count`` CPU-bound processes running for the length of the block (``seconds`` at the most)."""
    procs = [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)]) for _ in range(count)]
    try:
        time.sleep(2)  # let the load average and the scheduler see them
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def sample(server: LocalModelServer, prompt: str, tokens: int, seconds: float) -> tuple[float, float]:
    """Generated and read tokens/s of one streamed request, from llama.cpp's timings (prompt cache off).

    Closing the stream cancels the request, so generation stops ``seconds`` after its first token (once
    three were generated, enough for a rate) even where it crawls.
    """
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "temperature": 0,
        "cache_prompt": False,
        "ignore_eos": True,  # always as many tokens as asked, so samples compare
        "stream": True,
        "timings_per_token": True,
    }
    timings: dict[str, float] = {}
    first = None
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            timings = json.loads(line[6:]).get("timings") or timings
            generated = timings.get("predicted_n", 0)
            first = first or (time.monotonic() if generated else None)
            if first and generated >= 3 and time.monotonic() - first > seconds:
                break
    return timings["predicted_per_second"], timings["prompt_per_second"]


def measure(
    servers: dict[int, LocalModelServer], options: argparse.Namespace, prompt: str
) -> dict[int, tuple[float, float]]:
    """Median generated and read tokens/s per thread count, the servers' requests interleaved."""
    generated: dict[int, list[float]] = {threads: [] for threads in servers}
    read: dict[int, list[float]] = {threads: [] for threads in servers}
    order = list(servers)
    for run in range(options.runs):
        for threads in order if run % 2 == 0 else reversed(order):  # neither goes first every time
            gen, prompt_rate = sample(servers[threads], prompt, options.tokens, options.sample_seconds)
            generated[threads].append(gen)
            read[threads].append(prompt_rate)
    return {t: (statistics.median(generated[t]), statistics.median(read[t])) for t in servers}


def report(label: str, figures: dict[int, tuple[float, float]], seconds: float) -> None:
    """One phase's figures, each with its ratio against the fewest threads."""
    base_gen, base_read = figures[min(figures)]
    print(f"{label} ({seconds:.0f} s, load average now {os.getloadavg()[0]:.1f})")
    for threads, (gen, read) in figures.items():
        _line(f"{threads} thread(s): generated", f"{gen:.2f} tok/s", f"{gen / base_gen:.2f}x 1 thread")
        _line(f"{threads} thread(s): read (prompt)", f"{read:.1f} tok/s", f"{read / base_read:.2f}x 1 thread")


def main() -> None:
    """Parse the options, load one server per thread count, and measure both phases."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="thread counts to compare; fewest = baseline")
    parser.add_argument("--burners", type=int, default=3, help="busy processes in the busy phase")
    parser.add_argument("--runs", type=int, default=3, help="samples per figure (median printed)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated per sample at the most")
    parser.add_argument("--sample-seconds", type=float, default=15, help="generation time per sample at most")
    parser.add_argument("--prompt-words", type=int, default=120, help="words of the prompt read per sample")
    parser.add_argument("--burn-limit", type=float, default=900, help="seconds a burner spins at the most")
    parser.add_argument("--skip-quiet", action="store_true", help="measure the busy phase only")
    parser.add_argument("--skip-busy", action="store_true", help="measure the quiet phase only")
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed bench still stops its burners
    counts = sorted({int(n) for n in options.threads.split(",")})
    random.seed(7)
    prompt = "Summarise: " + " ".join(random.choice(WORDS) for _ in range(options.prompt_words))
    print(
        f"cores usable: {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f}, "
        f"LOCAL_MODEL_THREADS would give {thread_count()}"
    )
    path = resolve_model_path()
    servers = {t: LocalModelServer(model_path=path, n_threads=t, n_batch_threads=t) for t in counts}
    try:
        for server in servers.values():
            server.start()
            sample(server, "Hello.", 4, options.sample_seconds)  # fault the weights in
        print(f"model {path.name}, {options.runs} runs per figure, median; up to {options.tokens} tokens")
        quiet = busy = None
        if not options.skip_quiet:
            seconds, quiet = _timed(lambda: measure(servers, options, prompt))
            report("quiet", quiet, seconds)
        if not options.skip_busy:
            with burners(options.burners, options.burn_limit):
                seconds, busy = _timed(lambda: measure(servers, options, prompt))
            report(f"busy: {options.burners} spinning processes", busy, seconds)
        if quiet is not None and busy is not None:
            for threads in counts:
                gen = busy[threads][0] / quiet[threads][0]
                read = busy[threads][1] / quiet[threads][1]
                _line(f"{threads} thread(s): busy against quiet", f"{gen:.2f}x gen", f"{read:.2f}x read")
    finally:
        for server in servers.values():
            server.stop()


if __name__ == "__main__":
    main()
