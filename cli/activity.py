"""What a turn is doing while nothing shows yet: one live status line with the seconds elapsed.

On the embedded local model a turn can take a minute before its first word (the model reads a long prompt
on two cores), and a reply that is a tool call never shows as text at all; a silent terminal looks hung.
The agent graph reports its phases as LangGraph custom stream events, a dict with the key ``progress``:
``reading`` (a request was sent, nothing came back yet), ``writing`` (the first token arrived) and ``tool``
(a call named ``name`` started running; several may run side by side). A node's update says its phase
ended. ``Activity`` keeps that state and words it; ``StatusLine`` draws it as a transient spinner line
on the error console, erased before answer text or an approval card is printed, so the status is never
part of an answer, and not drawn at all where that console is not a terminal (a script's ``ask``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

#: The key of the graph's progress events among other custom stream data.
PROGRESS = "progress"
#: What a model phase is called on the status line.
PHASES = {"reading": "reading the prompt", "writing": "writing"}


def is_progress(data: Any) -> bool:
    """Whether a custom stream item is one of the graph's progress events (tools may stream data too)."""
    return isinstance(data, dict) and PROGRESS in data


@dataclass
class Activity:
    """The turn's current phase and running tools, from progress events and node updates.

    Attributes:
        clock: Seconds from an arbitrary start; a test passes its own.
        phase: ``reading`` or ``writing`` while the model works, else ``None``.
        since: When the phase began.
        calls: The reply being written is tool calls, which never show as text.
        quiet: The reply's text is on the screen, which says enough by itself.
        tools: The names of the tool calls running, one entry per call.
        tools_since: When the first of the running calls began.
    """

    clock: Callable[[], float] = time.monotonic
    phase: str | None = None
    since: float = 0.0
    calls: bool = False
    quiet: bool = False
    tools: list[str] = field(default_factory=list)
    tools_since: float = 0.0

    def progress(self, event: dict[str, Any]) -> None:
        """Take one progress event: a model phase began, or a tool call started."""
        kind = event.get(PROGRESS)
        if kind == "tool":
            if not self.tools:
                self.tools_since = self.clock()
            self.tools.append(str(event.get("name") or "a tool"))
        elif kind in PHASES:
            self.phase, self.since, self.calls, self.quiet = kind, self.clock(), False, False

    def wrote(self, *, calls: bool) -> None:
        """A chunk of the reply arrived, so the model writes (a native call sends no ``writing`` event).

        Args:
            calls: The chunk holds tool calls, which show nothing until the node ends (after any text).
        """
        if self.phase != "writing":
            self.phase, self.since, self.calls, self.quiet = "writing", self.clock(), False, False
        if calls:
            self.calls, self.quiet = True, False

    def text_shown(self) -> None:
        """The reply's text started showing: the status would only repeat it."""
        self.quiet = True

    def finished(self, node: str, update: Any) -> None:
        """A node ended, and with it its phase: the model's, or one tool call's."""
        if node == "execute_tool":
            self._tool_done(update)
        elif node == "call_model":
            self.phase = None
        else:  # a later node ran, so nothing before it is still running, whatever events were lost
            self.phase = None
            self.tools.clear()

    def _tool_done(self, update: Any) -> None:
        """Drop the call that ended, found by the name on its tool message (else the oldest call)."""
        messages = update.get("messages") if isinstance(update, dict) else None
        name = getattr((messages or [None])[-1], "name", None)
        if name in self.tools:
            self.tools.remove(name)
        elif self.tools:
            self.tools.pop(0)

    def label(self) -> str | None:
        """The status line's words, e.g. ``reading the prompt… 12 s``; ``None`` when nothing is to be said."""
        now = self.clock()
        parts = []
        if self.phase and not self.quiet:
            what = "writing tool calls" if self.phase == "writing" and self.calls else PHASES[self.phase]
            parts.append(f"{what}… {_seconds(now - self.since)}")
        if self.tools:
            names = ", ".join(n if k == 1 else f"{n} ×{k}" for n, k in Counter(self.tools).items())
            parts.append(f"running {names}… {_seconds(now - self.tools_since)}")
        return " · ".join(parts) or None


def _seconds(elapsed: float) -> str:
    return f"{max(int(elapsed), 0)} s"


class StatusLine:
    """The activity as a spinner line on ``console``, redrawn a few times a second so the seconds count.

    It must start at the beginning of a line and nothing else may print while it shows: its redraws
    erase the whole line they are on. Callers ``clear`` it before printing and ``sync`` it after events.
    """

    def __init__(self, console: Console, activity: Activity) -> None:
        self.console = console
        self.activity = activity
        self._spinner = Spinner("dots", style="cyan")
        self._live: Live | None = None

    @property
    def shown(self) -> bool:
        """Whether the line is on the screen (or would be, on a console that is not a terminal)."""
        return self._live is not None

    def sync(self) -> None:
        """Show the line when the activity has something to say, erase it when not."""
        if self.activity.label() is None:
            self.clear()
        elif self._live is None:
            self._live = Live(
                get_renderable=self._render,
                console=self.console,
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)
        else:
            self._live.refresh()

    def clear(self) -> None:
        """Erase the line, leaving the cursor where it began: text printed next takes its place."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _render(self) -> RenderableType:
        """The spinner with the activity's words as of now (called from the redraw thread too)."""
        self._spinner.update(text=Text(self.activity.label() or "", style="dim"))
        return self._spinner
