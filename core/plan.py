"""The model request of a turn: the plan ``trim`` makes of it, and how ``call_model`` assembles it.

``trim`` decides what the request holds within the window (B11) and writes that decision as a ``Plan``;
``call_model`` turns the plan and the thread's ``messages`` back into the request with ``assemble``. Like
langchain's ``ModelRequest``, the plan is the one description of a model call that both sides read. Unlike
it, the plan is state: it is checkpointed at every model call, so it names by reference what state already
holds (the earlier exchanges, the user's message, the tool results) and carries only text that was made
for this request (the rendered system prompt, the turn's context) or cut to fit.

The budget lives here too, since ``retrieve`` sizes the document context to the same share of the window
that ``trim`` later holds the system prompt and that context to.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from typing_extensions import TypedDict

from .context import Context
from .conversation import conversation, prompt_text

#: AnythingLLM's shares of the window: system prompt with its context, history, the user message, and the
#: user message when it goes alone.
SYSTEM_SHARE, HISTORY_SHARE, USER_SHARE, USER_ALONE_SHARE = 0.15, 0.15, 0.70, 0.80
FRAME = 3  # tokens of framing per message, as in count_messages

#: One earlier exchange a plan keeps: its index in the history, or its cut ``[prompt, response]``.
HistoryEntry = int | list[str]


class Plan(TypedDict, total=False):
    """What goes into this turn's model request, as ``trim`` decided it (see ``assemble``).

    Every plan ``trim`` builds has all six keys. Between turns the plan is empty (``route`` and ``finish``
    reset it to ``{}``), so a plan never outlives the model call it was made for; a checkpoint written before
    ``history_limit`` was recorded lacks that key. The keys and the shapes of their values are those of
    the checkpoints already written: they are read back as they were stored.
    """

    system: str | None
    """The system prompt as sent: rendered (date, workspace, user) and cut if it was over its share.

    Carried as text because it is made for this request. ``None`` when the user's message is so large that
    it goes alone, with nothing before it.
    """

    context: str | None
    """The remembered facts and document context, given just before the user's message, cut if need be.

    Text made for this request from the ``memories`` and ``context`` of state. ``None`` (or ``""``) when
    there is none, or when the user's message goes alone.
    """

    history: list[HistoryEntry]
    """The earlier exchanges kept, oldest first: each its index in the history or, when cut, its cut pair.

    By reference: an index points into the history ``conversation`` reads from the thread's ``messages``
    with ``history_limit``, which the checkpoint holds already; only a cut exchange is carried as its
    ``[prompt, response]`` texts.
    """

    user: str | None
    """The user's message cut to fit; ``None`` sends it as it stands in ``messages`` (by reference)."""

    tools: dict[str, str]
    """The cut content of the running turn's tool results, by ``tool_call_id``.

    Only cut results are carried; every other message of the running turn is sent from ``messages`` as it is.
    """

    history_limit: int
    """The ``history_limit`` the plan was made with, so ``assemble`` reads the history its indexes point into.

    Absent from plans checkpointed before it was recorded: then the whole history of ``messages`` is read.
    """


def render_system(ctx: Context) -> str:
    """The system prompt with its variables filled in: the part of every request that stays the same."""
    now = datetime.now().astimezone()
    text = ctx.system_prompt
    for name, value in {
        "{date}": f"{now:%B} {now.day}, {now.year}",  # AnythingLLM's (moment's "LL"): the month by name
        "{weekday}": now.strftime("%A"),
        "{datetime}": now.isoformat(timespec="seconds"),
        "{user_id}": ctx.user_id,
        "{workspace}": ctx.workspace,
    }.items():
        text = text.replace(name, value)
    return text


def assemble(plan: Plan, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The model request a plan describes over the thread's ``messages``: system prompt, history, the turn.

    The order keeps what stays the same first, so a server's prompt cache (llama.cpp's ``cache_prompt``,
    hosted providers' prefix caching) serves it again: the system prompt (to which a prompted call appends
    its tool catalog), then the earlier exchanges, and only then what changes from turn to turn — the
    remembered facts and document context found for this message, given with the user's message (in the
    system prompt, AnythingLLM's place, they made every later turn read the whole history again).

    The history the plan's indexes point into and the running turn are both read from ``messages``, as
    ``conversation`` reads them with the plan's ``history_limit``.
    """
    history, turn = conversation(messages, plan.get("history_limit"))
    system = plan.get("system")
    out: list[BaseMessage] = [SystemMessage(system)] if system is not None else []
    for entry in plan.get("history", []):
        prompt, response = (
            (history[entry]["prompt"], history[entry]["response"]) if isinstance(entry, int) else entry
        )
        out += [HumanMessage(prompt), AIMessage(response)]
    user, exchange = turn[0], turn[1:]
    cut_user = plan.get("user")
    text = cut_user if cut_user is not None else prompt_text(user)
    out.append(HumanMessage((plan.get("context") or "") + text, id=user.id))
    cuts = plan.get("tools", {})
    for m in exchange:
        if isinstance(m, ToolMessage) and m.tool_call_id in cuts:
            m = m.model_copy(update={"content": cuts[m.tool_call_id]})
        out.append(m)
    return out
