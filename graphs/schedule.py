"""When the memory graph runs by itself: every ``MEMORY_EXTRACTION_INTERVAL``, 3 hours unless set.

Both schedulers read it: the CLI's ``memory schedule`` loop and the served deployment's cron
(``server/memory_cron.py``). It is kept light (no graph is built on import), so the server's launcher can
read an interval without loading the graphs.
"""

from __future__ import annotations

import re

#: AnythingLLM's default interval between two memory runs.
DEFAULT_INTERVAL = "3h"
_UNITS = {
    **dict.fromkeys(["", "s", "sec", "secs", "second", "seconds"], 1),
    **dict.fromkeys(["m", "min", "mins", "minute", "minutes"], 60),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], 3600),
    **dict.fromkeys(["d", "day", "days"], 86400),
}


def parse_interval(text: str) -> float:
    """Seconds in an interval such as ``"3h"``, ``"3hr"``, ``"30m"``, ``"1h30m"``, ``"90s"`` or ``"90"``.

    Raises:
        ValueError: Not an interval, or not a positive one.
    """
    spec = re.sub(r"\s+", "", text.lower())
    parts = re.findall(r"(\d+(?:\.\d+)?)([a-z]*)", spec)
    if not re.fullmatch(r"(\d+(\.\d+)?[a-z]*)+", spec) or any(unit not in _UNITS for _, unit in parts):
        raise ValueError(f"not an interval: {text!r} (use e.g. 3h, 30m, 1h30m, or seconds)")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ValueError(f"the interval must be positive, got {text!r}")
    return seconds
