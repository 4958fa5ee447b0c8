"""Every rule the prompted path applies to steer a small model, in one table, each with its measurement.

A rule reacts to something the model did or is about to do, does one thing about it and records a decision.
Rules that steer (``steers=True``) exist only because a measurement showed they pay; each names the command
that measures it on its own (``bench/chains.py --without NAME``: same run, the rule off) and the latest
figure on tasks it was not tuned on. A steering rule whose measurement does not hold there is removed, not
kept "just in case". Guards (``steers=False``) keep a promise the project makes whatever the model does
(no call JSON shown, no runaway list, a catalog that fits the window): they are not switched off to measure.

``off`` is for the benches only: a rule named there does nothing in this process.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The rules a bench switched off in this process (``bench/chains.py --without``); empty in production.
off: set[str] = set()


@dataclass(frozen=True)
class Rule:
    """One rule of the prompted path.

    Attributes:
        name: What ``--without`` takes and the code asks ``on`` about.
        reacts_to: What the model did (or is about to be asked) that sets the rule off.
        does: What the rule does about it.
        decision: The decision it records (id and outcome).
        why: The failure it answers, as it was seen.
        steers: A steering rule (kept only on a measurement) rather than a guard.
        measured: The command and figure that justify a steering rule, on tasks it was not tuned on.
    """

    name: str
    reacts_to: str
    does: str
    decision: str
    why: str
    steers: bool
    measured: str = ""


STRICT = "bench/chains.py --split person,single [--without NAME], 1.5B; bench/README.md#the-strict-reading"

RULES = (
    Rule(
        "catalog_fit",
        "the tools' descriptions do not fit the window beside the request",
        "keeps the tools most relevant to the person's message (catalog.fit_tools)",
        'C1 {"offered", "left_out"}',
        "a catalog over the window would push out the question or the reply's room",
        steers=False,
    ),
    Rule(
        "call_grammar",
        "a reply under a llama.cpp endpoint",
        "constrains it to plain text or well-formed calls of the offered tools (call_grammar)",
        'C1 "grammar refused" when the endpoint cannot take it',
        "without it a small model's calls were often malformed JSON or prose around JSON",
        steers=False,
    ),
    Rule(
        "once_each",
        "one reply writes the same call (tool and arguments) more than once",
        "runs it once (a runaway list until the token limit asks for one thing)",
        'C1 "repeats dropped"',
        "a small model sometimes writes one call over and over to the token limit",
        steers=False,
    ),
    Rule(
        "no_such_tool",
        "a reply that reads as a call of a tool that does not exist",
        "asks again without tools, so no call JSON reaches the person",
        'C1 (model) "no such tool"',
        "the answer must be words, not a call that cannot run",
        steers=False,
    ),
    Rule(
        "withheld_call",
        "the last reply is a call that cannot run (budget spent, no such tool)",
        "answers with the results so far in words, never the call's JSON",
        'G1 "call withheld"',
        "a call is never shown as JSON",
        steers=False,
    ),
    Rule(
        "next_step_ask",
        "a round of results is in and tools are still offered",
        "folds the calls and results into the user message and asks for the next call or the answer (digest)",
        "none (the prompt's text)",
        "the model must choose between another step and the answer itself",
        steers=False,
    ),
    Rule(
        "check_figures",
        "an answer after results states a figure no result, document or question holds, or shows machinery; "
        "an agent answer with no tool run writes a call of its tools as JSON",
        "asks again once, naming the difference; else the results in plain words, or the words before the "
        "call (nodes/check_figures.py)",
        "G3",
        "the model read the right result and then wrote its own number",
        steers=False,
        measured=f"{STRICT.replace('NAME', 'check_figures')}: 2026-12-04, strict 6 of 16 with and without it",
    ),
    Rule(
        "empty_calls",
        "an agent answer that closes with an empty list of calls (``[]``, fenced or not), words before it",
        "shows the words without the list and the line leading into it (check_figures._without_empty_calls)",
        'G3 "empty call list cut"',
        'answering in prose with no tool run, the 1.5B ended "Therefore, the answer is:" and a fenced []',
        steers=False,
    ),
    Rule(
        "write_figures",
        "a write call whose arguments state a figure no result, document or question holds, or state an "
        "input of the turn's calculate and none of its results, or copy the loop's own words to the model",
        "sends it back to the model once, before the policy or a person sees it (check_written_figures)",
        'G3 "STRAY_WRITE" / "LOOP_WRITE" ({"stray"}, {"operand"} or {"copied"})',
        "a note held the model's own sum where calculate had returned another; another held 120, the "
        "input of calculate('5 * 120'), where it had returned 600 (fresh-clone CI, 2026-12-05); a note "
        "saved the next-step ask ('... Check every part of the question.'; grove, 2026-12-07)",
        steers=False,
    ),
    Rule(
        "calculate_operands",
        "a calculate call whose expression holds a figure no result, document or question of the turn holds "
        "(a small count, a half, a unit's factor, a percent's 100 or fraction aside)",
        "answers it not run, naming the figure and asking for a lookup or 'not known'; withholds the tools "
        "after a round of only such refusals if none is left to look it up, or on the second; the answer "
        "after it is checked even with no result (approve.check_operands, call_model._made_up_again)",
        'G3 {"unsourced": [...]}',
        "with no document to read, the 1.5B priced three installations with calculate('3 * 100') and "
        "answered '300 dollars', which G3 then found in a result (langgraph dev, default workspace, "
        "2026-12-07); with history, ten refused calculations in a row (husk, 2026-12-08)",
        steers=False,
        measured="bench/chains.py --split husk --history [--without calculate_operands]: 2026-12-08, strict "
        "7/8 with it, 3/8 without (a figure nobody gave: 4/5 against 0/5; every figure given: 3/3 both)",
    ),
    Rule(
        "stream_hold_back",
        "a prompted reply being streamed reaches a brace or a code fence",
        "streams nothing from there on: a call or a digest copy is never shown as it is written (streaming)",
        "none (what streams)",
        "calls, and text that goes on into a call or copies the digest, must never reach a client",
        steers=False,
    ),
    Rule(
        "arithmetic_asked",
        "a question about a quantity (how many, how much, how long) that gives no number to compute with, "
        "names no operation and asks for no unit to convert to",
        "does not offer calculate for its words (cues.asked_for); its embedding may still offer it",
        'C0 "calculate: not relevant"',
        "a fact question the documents answer (after how many failed attempts is a check down?) ran "
        "calculate on the figure read, once in four such tasks with a figure the documents did not hold",
        steers=True,
        measured=(
            "bench/chains.py --split ledger,plumb [--without arithmetic_asked], 1.5B, untouched sets: "
            "2026-12-06, strict 13 -> 14 of 16 (one-step 6 -> 7 of 8), unneeded tools 2 -> 1"
        ),
    ),
    Rule(
        "unit_given",
        "calculate's only cue is a figure asked for in a unit, and the passages given with the message "
        "state a figure in that unit",
        "does not offer calculate for its words (cues.unit_given); its embedding may still offer it",
        'C0 "calculate: ...; asked in <unit>, which the given passages state"',
        "asked how many days the documents keep results (90 days), the 1.5B ran calculate('90'); asked "
        "within how many days a refund may be asked (30 days), it ran calculate('30 - 7') and answered 23",
        steers=True,
        measured=(
            "bench/chains.py --split thicket,sprig,quarry [--without unit_given], 1.5B; thicket written "
            "before the rule: 2026-12-06, strict 11 -> 17 of 24 (thicket 0 -> 4 of 8, sprig 6 -> 8 of 8, "
            "quarry 5 -> 5 of 8), unneeded tools 7 -> 1; median one-step turn 16.8 -> 44.1 s (lookups "
            "now search the documents)"
        ),
    ),
    Rule(
        "figure_alone",
        "a message whose only cue for calculate is one number (a title, a year, a limit) or 'together', "
        "with no operation and no quantity or count in time asked for",
        "does not offer calculate for its words (cues.something_to_compute); its embedding may still "
        "offer it",
        'C0 "calculate: ..."',
        "offered calculate for its one number, the 1.5B ran calculate('1984 written by George Orwell') for "
        "'Who wrote the novel 1984?'; for 'what share of all checks has to fail together ...?' it ran "
        "calculate('100 / 80') and the person read 1.25",
        steers=True,
        measured=(
            "bench/chains.py --split encore,heath,reed,sedge,sealed --only <its three tasks> [--without "
            "figure_alone], 1.5B: 2026-12-07, it changes the offer of 3 tasks of all sets (never a task that "
            "needs calculate); held out, pause-percent-note without history wrong -> right (calculate('100 / "
            "3') noted as 33.3), with history right both; tuned (sedge): 2 tasks wrong -> right"
        ),
    ),
    Rule(
        "figure_counts",
        "a message whose one number counts things ('3 installations', 'in 33 years')",
        "reads it as something to compute: calculate is offered (cues.something_to_compute)",
        'C0 "calculate: asked for in words"',
        "not offered calculate, the 1.5B answered 'In 33 years, which year will it be?' with a year no "
        "result held, which G3 then replaced by the clock's reading; 'I run 3 installations on the Business "
        "plan ... my monthly bill?' was not offered it either",
        steers=True,
        measured=(
            "bench/chains.py --split thorn,grove --only year-in-33,business-bill-x3 [--without "
            "figure_counts], 1.5B: 2026-12-07, it changes the offer of these 2 of the bench's 272 tasks "
            "(both need calculate) and of no task of one step or none; year-in-33 (untouched thorn) wrong "
            "in both untouched runs and in the same code's run without it, right (2059) in both runs with "
            "it; business-bill-x3 wrong either way (read the Team price); bench/README.md, stop 57"
        ),
    ),
    Rule(
        "passages_only",
        "the only tool C0 would offer is search_documents, for no reason but the passages retrieval "
        "already gave with the message",
        "offers no tool: the turn answers from the passages in its prompt (nodes/choose_tools)",
        'C0 "search_documents: ... the prompt holds those passages"',
        "asked for how many minutes the reset link is valid, with the passage saying so in its prompt, the "
        "1.5B searched, searched again, then answered: three model calls and the passages read three times",
        steers=True,
        measured=(
            "bench/chains.py --split moss,thicket,sprig,bramble [--without passages_only], 1.5B; moss and "
            "bramble written before it: 2026-12-06, strict 24 -> 25 of 32; the 7 lookups it fired on 5 -> 6 "
            "right, median 121 -> 45 s (5.9x -> 1.7x the one-call baseline); tokens read per task 870 -> 571"
        ),
    ),
    Rule(
        "calculate_by_words",
        "calculate is close to the message by embedding, and the message asks for no arithmetic in words",
        "does not offer calculate (nodes/choose_tools)",
        'C0 "calculate: no figure or operation to compute with in the message"',
        "asked what the Team plan costs a year if paid yearly (120 EUR in the passages given), the 1.5B was "
        "offered calculate by embedding and answered 144 from 12 * 12",
        steers=True,
        measured=(
            "bench/chains.py --split heath,moss [--without calculate_by_words], 1.5B; heath written before "
            "it: 2026-12-06, strict 8 -> 12 of 16 (heath 1 -> 5 of 8, moss 7 -> 7), unneeded tools 3 -> 0, "
            "stray figures 8 -> 4; one task lost (588 a year paid monthly, asked with no figure: said 490)"
        ),
    ),
    Rule(
        "choose_tools",
        "a turn of a model that reads its tools from the prompt",
        "offers the tools the message needs; acting ones only when asked for in words (nodes/choose_tools)",
        'C0 {"offered", "left_out"}',
        "offered every tool, the 1.5B called tools a question did not need and proposed unasked notes",
        steers=True,
        measured=(
            f"{STRICT.replace('person,single', 'plain,brief,person,single')}: 2026-12-05, "
            "strict 18 -> 23 of 32 (one-step 8 -> 12 of 16), tasks with an unneeded tool 9 -> 4; "
            "median one-step turn 0.69x the seconds; tokens read per task 546 -> 734 (a catalog that "
            "changes is not a cached prefix)"
        ),
    ),
    Rule(
        "reminder",
        "the person's message follows history or document context, on the turn's first call",
        "says the catalog's rule again after the message (catalog.with_reminder)",
        "none (the prompt's text)",
        "after plain-word exchanges or a page of context, the model answered in prose and made numbers up",
        steers=True,
        measured=(
            f"{STRICT}: "
            "2026-12-04, without history: strict 6 -> 8 of 16 WITHOUT it (it drew unneeded calls); "
            "2026-12-05 with history (its purpose), plain,brief,person,single: strict 21 of 32 with it, 19 "
            "without; two-step 10 -> 5 of 16 without it (one-step 11 -> 14)"
        ),
    ),
    Rule(
        "reopen",
        "under the grammar, the model closed its list of calls while giving another call >= CONTINUE_AT",
        "reopens the list for that call (more_calls)",
        'C1 "list reopened"',
        "asked for two things, a small model often closes its list after the first in a near-tie",
        steers=True,
        measured=(
            "bench/bfcl.py --categories parallel,parallel_multiple --sample 20 [--reopen off], 1.5B, "
            "held out: 2026-12-05, 55 % / 45 % with it, 45 % / 40 % without (all 50.0 % vs 42.5 %; calls "
            "given per call expected 0.78 vs 0.72)"
        ),
    ),
    Rule(
        "held_writes",
        "a write call in the same reply as a lookup before it, or with a slot for a result not yet had",
        "holds the write back as waiting; the next reply is calls of the waiting tools only, once: a call "
        "left waiting again exactly as before is not waited for a second time (waiting_calls)",
        "the write's invalid call (HELD / SLOT)",
        "the note held the model's guess instead of the computed number. A guard, not a steer: G3 checks a "
        "write's figures against the turn's results, and a write in one list with its lookup has none yet "
        "(it never fired on the bench's untouched tasks: the 1.5B wrote such steps in two rounds there)",
        steers=False,
    ),
    Rule(
        "named_unused",
        "after a round of results, the question asks in words for an offered tool that acts, not yet run",
        "names those tools in the next-step ask (NAMED_UNUSED)",
        'C1 {"named_unused"}',
        "after a calculate the model repeated it instead of writing the note",
        steers=True,
        measured=(
            f"{STRICT}: 2026-12-04, done 12 -> 10 and strict 6 -> 5 of 16 without it (two notes lost); "
            "2026-12-05 reading only actions: the same strict count (21 vs 22 of 32), and 'Which documents "
            "are in this workspace?' one round after the listing instead of three (115 s -> 27 s); "
            "bench/chains.py --split grove,person,fern [--without named_unused], grove untouched: "
            "2026-12-07, strict 16 vs 14 of 24, the four document-then-note tasks wrote no note without it"
        ),
    ),
    Rule(
        "repeat_refused",
        "under the grammar, a reply that only repeats calls already run while a named tool has not run",
        "asks again at once, for the answer or a call of a named tool (_without_repeats)",
        'C1 {"repeat_refused"}',
        "offered every tool, it reached for whatever was left; asked for text, it wrote wrong workings",
        steers=True,
        measured=(
            f"{STRICT}: 2026-12-04: strict 6 of 16 with and without; one round fewer on one task, a note kept"
        ),
    ),
    Rule(
        "described_call",
        'a text reply that says a tool should be called ("you need to call `calculate`")',
        "asks for that call under the grammar of calls (described_calls)",
        'C1 "described call asked for"',
        "the model wrote the step it meant as advice to the person",
        steers=True,
        measured=f"{STRICT}: 2026-12-04: strict 6 of 16 with and without; without it 2 answers showed a call",
    ),
    Rule(
        "repeat_once",
        "a call the model wrote again with the same arguments, given its earlier result again (approve)",
        "lists it in the digest as a repeat, without its result a second time (digest)",
        "none (the prompt's text)",
        "the 1.5B wrote most calls twice; a document search's passages then filled its prompt twice, and "
        "reading them again cost the most of a turn's seconds",
        steers=True,
        measured=(
            "bench/chains.py --split ledger,plumb [--without repeat_once], 1.5B, untouched sets: 2026-12-06, "
            "strict 14 of 16 both; tokens read per task 966 -> 846, a document task 144 s -> 113 s"
        ),
    ),
    Rule(
        "given_passages_once",
        "a document search's passage that the user message's document context holds already (digest)",
        "names it in the digest as the same passage as in the context, without its text again",
        "none (the prompt's text)",
        "retrieval gave four passages and the model's own search returned three of them again: the prompt "
        "read them twice, and the question stood two pages above the ask",
        steers=True,
        measured=(
            "bench/chains.py --split coda,encore,person,plain,morrow,ledger,quarry --history --only <their "
            "document-then-note tasks> [--without given_passages_once], 1.5B, never tuned on: 2026-12-07, "
            "strict 6 -> 7 of 8, tokens read per task 2695 -> 2024, median 205 s -> 162 s; on reed, thicket "
            "and fen it never fired (no search while retrieval had given passages)"
        ),
    ),
    Rule(
        "no_args_once",
        "a read-only tool that takes no arguments has answered in this turn (current_datetime, "
        "list_documents)",
        "leaves it out of the call grammar from then on; when the turn has no other tool, withholds the "
        "tools so the next reply is the answer (answered_tools)",
        'C1 {"answered"}, or G1 "tools withheld"',
        "the 1.5B called current_datetime again after its result in every one of 14 date questions of "
        "earlier sets: a second round to be told the same date",
        steers=True,
        measured=(
            "bench/chains.py --split single,brief,nudge,plumb,sprig,moss,reed,sedge,bramble,quarry,ledger,"
            "morrow --only <their 14 date questions and 10 two-step date tasks> [--without no_args_once], "
            "1.5B, never tuned on: 2026-12-07, strict 23 of 24 both; the date questions 2 -> 1 round each "
            "(14 of 14), median 24.5 -> 15.1 s (0.95x -> 0.57x the one-call baseline); two-step tasks "
            "unchanged (2.4 rounds, the same calls)"
        ),
    ),
    Rule(
        "write_ends",
        "a round after results whose calls all succeeded and include a write, and the question asks for no "
        "action that has not run (wrote_last, named_unused)",
        "withholds the tools: the next reply is the answer (call_model._offered_tools)",
        'G1 "tools withheld"',
        "after a note made from a result was saved, the 1.5B wrote the same save_note again in most note "
        "tasks: a round to be told it had run",
        steers=True,
        measured=(
            "bench/chains.py --split person,single,sedge,fern [--without write_ends], 1.5B, never tuned on "
            "but fern (written before it): 2026-12-07, strict 28 vs 27 of 36 (the one task that differs, "
            "days-left-month, writes nothing: the clock's noise); model calls per two-step task 2.68 vs "
            "2.77 (person 3.12 vs 3.25); note tasks ending a round sooner 2 of 9"
        ),
    ),
    Rule(
        "history_first_round",
        "a prompted agent round after this turn's first, in a thread with earlier exchanges",
        "leaves the earlier exchanges out of the request; the first round read them (this_turn_only)",
        'B4 "earlier exchanges left out"',
        "after its search, the 1.5B saved the history's last answer as the note asked for (\"A yellow fruit "
        "is an apple.\"), or answered the history's question about the sky",
        steers=True,
        measured=(
            "bench/chains.py --split fern,frond,person --history [--without history_first_round], 1.5B, "
            "person and frond never tuned on: 2026-12-07, strict 15 vs 13 of 24 (person 5 vs 4 of 8, fern 3 "
            "vs 2, frond 7 vs 7); answers or notes taking up an earlier exchange 0 vs 1; tokens read per "
            "task 934 vs 746 (the turn's message is read again after the first round); without history 18"
        ),
    ),
    Rule(
        "answer_after_repeats",
        "a round of calls that all repeated calls already answered, failed ones included (approve)",
        "withholds the tools: the next reply is the answer (call_model._offered_tools)",
        'G1 "tools withheld"',
        "a model asking again for what it has is going round in circles",
        steers=True,
        measured=(
            f"{STRICT}: "
            "2026-12-04: without it 3.31 calls/task (1.94 with), 6-10 rounds of one call; strict 7 vs 6"
        ),
    ),
)

BY_NAME = {rule.name: rule for rule in RULES}


def on(name: str) -> bool:
    """Whether the rule applies in this process (always, unless a bench switched it off).

    Raises:
        KeyError: No rule has that name: the table and the code disagree.
    """
    return BY_NAME[name].name not in off
