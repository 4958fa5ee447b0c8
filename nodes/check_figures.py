"""G3 — does the answer state only figures the tools, the documents or the question hold? It is checked.

A small model reads its tools' results and then writes its own number: ``calculate`` returned 720 and the
1.5B answered "5 installations cost 60 EUR per year"; it called the 7-month total "the monthly price". Code
can tell such a figure from one it was given, so it checks before the answer ends the turn: every number in
the answer must be found in the tool results of this turn, the prompt the model read (the documents given,
the question, the earlier exchanges, the date) or be a small count. A figure none of them holds is not shown
as fact: the model is asked once more, without tools, with the difference named; if its second answer still
states one, the person reads the tools' results in plain words instead. An answer that shows the machinery
(a call's JSON, a code fence, a line of the results' digest, which the 1.5B copied from its prompt) is held
back the same way, and so is an answer with no figure at all after ``calculate`` returned one ("The
calculation is done."). Figures are checked only in turns in which a tool ran: without results there is
nothing to hold a figure against but the model's own knowledge. A call of one of the turn's tools written
into the answer as JSON is held back in every agent turn: with history the 1.5B once answered a document
question by writing its plan and the same call ten times in code fences, calling nothing, until its token
limit.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

from ..core.context import Context
from ..core.conversation import message_text, results_in_words, turn_question, turn_start
from ..core.figures import NUMBER_WORD, figures, problems, refused_calculations, shown, turn_sources
from ..core.plan import assemble
from ..core.prompts import (
    ASK_AGAIN_FIGURES,
    CONTEXT_DELIMITER,
    DOCUMENT_HEADER,
    NO_PLAIN_ANSWER,
    NO_RESULT_STATED,
    NOT_GIVEN,
    RESULTS_IN_WORDS,
    SHOWS_MACHINERY,
    STRAY_FIGURES,
)
from ..core.state import AgentState, Decision, decision
from ..providers.prompted.call_grammar import TEXT_GRAMMAR
from .services import Services

#: An empty list of calls closing an answer, fenced or not: the catalog's form for "no call", not words. The
#: 1.5B, answering a document question in prose with no tool run, ended "The answer is:" and a fenced ``[]``.
_NO_CALLS = re.compile(r"(?:```[a-z]*\s*)?\[\s*\]\s*(?:```)?\s*$")
#: A document text's delimiter or header copied into an answer, with a line about the context leading in.
_DELIMITER = re.compile(
    r"(?:^[^\n]*\b[Cc]ontext\b[^\n]*:[ \t]*\n\s*)?(?:"
    + CONTEXT_DELIMITER.pattern
    + "|"
    + DOCUMENT_HEADER.pattern
    + ")",
    re.M,
)
#: A call written as JSON (in a fence or not): ``{"name": "<tool>", ...``; ``args`` when its arguments follow.
_QUOTED_CALL = re.compile(
    r'(?:```[a-z]*\s*)?\[?\s*\{\s*"name"\s*:\s*"(?P<name>[^"]+)"(?P<args>\s*,\s*"(?:arguments|parameters)"\s*:)?'
)


def quoted_call(answer: str, tools: set[str]) -> re.Match[str] | None:
    """Where the answer first writes a call as JSON; ``None`` if it writes none.

    A call is an object naming one of ``tools``, or naming any tool with its arguments next: offered no tool,
    the 1.5B answered "Who wrote the novel 1984?" with "I can use the Wikipedia tool to do this." and
    ``[{"name": "wikipedia", "arguments": {...}}]``. An object with a name and other fields
    (``{"name": "Ann", "age": 30}``) is data the person may have asked for.
    """
    return next((m for m in _QUOTED_CALL.finditer(answer) if m["name"] in tools or m["args"]), None)


def before_the_call(answer: str, call: re.Match[str]) -> str:
    """The answer's words before a call written into it, without a line that leads into the call."""
    words = answer[: call.start()].rstrip()
    if words.endswith(":"):  # "Here is the call:" goes with it: its line, or its sentence
        head, newline, _ = words.rpartition("\n")
        sentence = words.rpartition(". ")[0]
        words = head.rstrip() if newline else (sentence + "." if sentence else "")
    return words or NO_PLAIN_ANSWER


async def _no_quoted_call(
    state: AgentState, ctx: Context, services: Services, last: AIMessage, answer: str
) -> dict[str, Any]:
    """G3 for an agent turn that ran no tool: an answer writing a call of its tools as JSON is not shown."""
    tools = set((await services.toolset(ctx)).tools)
    call = quoted_call(answer, tools) if state.get("route") == "agent" else None
    if call is None:
        return {}
    notes = [decision("G3", "code", {"machinery": True}, f"the answer {SHOWS_MACHINERY} (no tool ran)")]
    again = await _ask_again(state, ctx, services, answer[: call.end() + 200], SHOWS_MACHINERY, "")
    still = quoted_call(again, tools) if again else call
    if again and still is None:
        notes.append(decision("G3", "model", "answered again", "the second answer writes no call"))
        text = again
    else:
        text = before_the_call(again or answer, still or call)
        notes.append(decision("G3", "code", "cut at the call", "the second answer wrote a call too"))
    return {"messages": [last.model_copy(update={"content": text})], "decisions": notes}


def _without_empty_calls(state: AgentState, answer: str) -> tuple[str, list[Decision]]:
    """An agent answer without the empty list of calls it may close with, and the line leading into it.

    Only where words are left to keep: a reply that is nothing but ``[]`` is no answer, and the turn's other
    checks see it as it is.
    """
    found = _NO_CALLS.search(answer) if state.get("route") == "agent" else None
    if found is None:
        return answer, []
    words = before_the_call(answer, found)
    if words == NO_PLAIN_ANSWER:
        return answer, []
    why = "the answer closed with an empty list of calls, the catalog's form for none: cut, with its lead-in"
    return words, [decision("G3", "code", "empty call list cut", why)]


def _without_delimiters(state: AgentState, answer: str) -> tuple[str, list[Decision]]:
    """An answer without the delimiters and headers of the document texts it copied ("[END CONTEXT 3]").

    They are the prompt's layout, never words for the person, and cutting them changes no statement, so code
    cuts them in every route with no model call. Only where words are left: a reply that is nothing but
    delimiters is no answer, and the turn's other checks see it as it is.
    """
    words = re.sub(r"\n{3,}", "\n\n", _DELIMITER.sub("", answer)).strip()
    if not words or not _DELIMITER.search(answer):
        return answer, []
    why = "the answer copied the delimiters or headers of the document texts in its prompt: cut"
    return words, [decision("G3", "code", "delimiters cut", why)]


def computed_unstated(ran: list[ToolMessage], answer: str) -> bool:
    """Whether ``calculate`` returned a figure this turn and the answer states no figure at all.

    ``calculate``'s result is all it gives, so an answer without a figure withholds it: the 1.5B, with
    earlier exchanges in its prompt, answered "What is 15 percent of 640?" with "The calculation is done."
    Only a figure-less answer is held back, a figure written as a word counting as one ("two"): "Yes, 17 is
    prime" after ``17 % 2`` states the question's figure, and a tool that looks something up may well answer
    a question with words.
    """
    computed = any(m.name == "calculate" and figures(message_text(m)) for m in ran)
    return computed and not figures(answer, clock=False) and not NUMBER_WORD.search(answer)


def _problem(stray: list[float], shows: bool) -> str:
    named = STRAY_FIGURES.format(figures=", ".join(shown(n) for n in stray)) if stray else ""
    return " and ".join(p for p in (named, SHOWS_MACHINERY if shows else "") if p)


async def _ask_again(
    state: AgentState, ctx: Context, services: Services, answer: str, problem: str, words: str
) -> str:
    """The model's answer written again, without tools, told what is wrong with it and what the tools gave."""
    request: list[BaseMessage] = assemble(state.get("plan", {}), state["messages"])
    system = [m for m in request[:1] if isinstance(m, SystemMessage)]
    question = turn_question(request) or HumanMessage("")
    ask = ASK_AGAIN_FIGURES.format(answer=answer, problem=problem, results=words)
    prompt = [*system, HumanMessage(message_text(question) + "\n\n" + ask)]
    options: dict[str, Any] = {"max_tokens": ctx.max_tokens or ctx.reply_reserve}
    if services.call_grammar() and not ctx.native_tool_calling:
        options["extra_body"] = {"grammar": TEXT_GRAMMAR}
    reply = await services.chat_model(ctx).bind(**options).ainvoke(prompt)
    return message_text(reply).strip()


async def check_figures(state: AgentState, runtime: Runtime[Context], *, services: Services) -> dict:
    """G3: an answer after tool results states only figures they, the prompt or the question hold, in words.

    The check is code; the second answer is the model's; the fallback is the tools' own words. Each is a
    decision in the trace, with what was at fault.
    """
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or last.tool_calls or last.invalid_tool_calls:
        return {}
    answer, cut = message_text(last), []
    for without in (_without_delimiters, _without_empty_calls):
        answer, found = without(state, answer)
        cut += found
    if not cut:
        return await _checked(state, runtime.context, services, last, answer)
    last = last.model_copy(update={"content": answer})
    checked = await _checked(state, runtime.context, services, last, answer)
    return {"messages": checked.get("messages", [last]), "decisions": cut + checked.get("decisions", [])}


async def _checked(
    state: AgentState, ctx: Context, services: Services, last: AIMessage, answer: str
) -> dict[str, Any]:
    """G3 on one answer: its figures after tool results, or a call written into it when no tool ran."""
    messages = state["messages"]
    ran, sources = turn_sources(state.get("plan", {}), messages[:-1])
    # after a refused calculation an answer's figure is a guess, checked like one even when no tool ran
    made_up = not any(m.name == "calculate" for m in ran) and bool(refused_calculations(messages))
    if not ran and not made_up:
        return await _no_quoted_call(state, ctx, services, last, answer)
    stray, shows = problems(answer, sources)
    unstated = not stray and not shows and computed_unstated(ran, answer)
    if not stray and not shows and not unstated:
        why = "every figure of the answer is in the tool results, the documents or the question"
        return {"decisions": [decision("G3", "code", "agrees", why)]}
    problem = NO_RESULT_STATED if unstated else _problem(stray, shows)
    found = (
        {"result_unstated": True}
        if unstated
        else {"asked_again": stray, **({"machinery": True} if shows else {})}
    )
    notes = [decision("G3", "code", found, f"the answer {problem}")]
    words = (
        NOT_GIVEN
        if made_up
        else RESULTS_IN_WORDS + "\n".join(results_in_words(messages[turn_start(messages) :]))
    )
    again = await _ask_again(state, ctx, services, answer, problem, words)
    still = problems(again, sources) if again else (stray, shows)
    if again and not still[0] and not still[1] and not computed_unstated(ran, again):
        notes.append(decision("G3", "model", "answered again", "the second answer holds only what was given"))
        text = again
    elif unstated and again and not still[0] and not still[1]:
        # words the model may need to keep ("Yes, it is more") go first; the result the person asked for after
        notes.append(decision("G3", "code", "results added", f"the second answer {NO_RESULT_STATED}"))
        text = f"{again}\n\n{words}"
    else:
        why = f"the second answer {_problem(*still) or NO_RESULT_STATED}"
        notes.append(decision("G3", "code", "not given said" if made_up else "results shown", why))
        text = words
    return {"messages": [last.model_copy(update={"content": text})], "decisions": notes}
