"""Every text the models are given, in one place.

The system prompt, the tool catalog's rules, the notes a prompted turn adds, and the memory job's and the
summaries' instructions.

Wording here is behaviour: the small local models follow it closely (the catalog's rules and the reminder were
measured on them, see ``providers/prompted``), and tests match some of it exactly. Change it here, with the
benches (`bench/bfcl.py`, `bench/chains.py`) run before and after.
"""

import re

# --- the agent's turn ------------------------------------------------------------------------------------

#: A workspace's system prompt until it sets its own; ``{workspace}``, ``{weekday}`` and ``{date}`` are filled
#: per turn. The weekday is there because, asked to note it, the 1.5B wrote "Today is a weekday."; the date
#: names its month (AnythingLLM's form) because, given 2026-12-03, it noted "January 2027" as the month.
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant for the workspace {workspace}. Today is {weekday}, {date}. "
    "Answer from the context and tools you are given when they are relevant; say so when you do not know."
)


def memory_block(memories: list[str]) -> str:
    """The remembered facts, as the turn's request gives them (with the user's message, after the cache)."""
    return "Things I remember about you:\n" + "".join(f"- {m}\n" for m in memories) if memories else ""


def context_block(texts: list[str]) -> str:
    """Document context in AnythingLLM's layout."""
    if not texts:
        return ""
    return "Context:\n" + "".join(f"[CONTEXT {i}]:\n{t}\n[END CONTEXT {i}]\n\n" for i, t in enumerate(texts))


#: The delimiters ``context_block`` puts around each document text, as an answer may copy them: the 1.5B,
#: with earlier exchanges in its prompt, closed an answer in prose with "[END CONTEXT 3]". A person must never
#: read them (G3 cuts them; a write's text holding one is sent back).
CONTEXT_DELIMITER = re.compile(r"\[(?:END )?CONTEXT \d+\]:?")
#: The header each document text opens with (``skills.documents.metadata_header``), as an answer may copy it:
#: with history the 1.5B answered with its plan, then "The relevant context is:" and the header whole.
DOCUMENT_HEADER = re.compile(
    r"(?s:<document_metadata>.*?(?:</document_metadata>|\Z))\s*|</document_metadata>"
)


# --- prompted tool calling (models without native tool calls) ---------------------------------------------

#: The catalog's rules, put before the list of tools in the system prompt.
CATALOG_INSTRUCTIONS = (
    "You can call the tools below. To call tools, reply with only a JSON list, one object per call:\n"
    '[{"name": "<tool name>", "arguments": {...}}, {"name": "<tool name>", "arguments": {...}}]\n'
    "Put every call the request needs in that one list; when the same tool is needed for several things, "
    "write one object for each. A call that needs what another call returns comes later: write the first "
    "call now, and its result comes back to you before you write the next. Give every required argument "
    "and leave out optional ones you have no value for. Write numbers and true/false without quotes. When "
    "no tool helps, answer the user in plain text."
)

#: Said again after the user's message when earlier exchanges stand between it and the catalog.
REMINDER = (
    "\n\n(If a tool is needed for this, reply with only the JSON list of calls; otherwise answer directly.)"
)

#: Told after the results of each round while tools are still offered: another step, or the answer. Told
#: "if all is done, answer", the 1.5B once answered "The calculation is done."; "if nothing is left to do,
#: answer the question" fixed that, but after ``list_documents`` it then wrote "To answer the question
#: ..., I need to list the documents" instead of the list, so the older wording stands.
ASK_NEXT_STEP = (
    "Check every part of the question. If a part is still to do, reply with only the JSON list of its "
    "calls, using these results; if all is done, answer briefly in plain sentences."
)
#: Said before ``ASK_NEXT_STEP`` when the question names offered tools that have not run in this turn.
NAMED_UNUSED = "The question also names {tools}, which this turn has not used yet. "
#: Told after the results once the turn's tool budget is spent, or after a round of repeats. Asked only to
#: answer "from these results", the 1.5B answered the first half of "after how many failed attempts is a
#: check marked down? Multiply that by 20" with the document's sentence and left out the 60 its ``calculate``
#: had returned; asked to give the results in its answer, it wrote "... Multiply that number by 20 to get 60."
#: (Said in the next-step ask too, it made the model repeat its call instead of answering: not there.)
ASK_ANSWER = (
    "No more tools can be used for this question. Answer it briefly in plain sentences, without code, and "
    "give the results above in your answer."
)
#: Why a call cut off by the token limit did not run, as the person reads it (with what the tools returned).
CUT_CALL = "it was cut off by the output limit before it was complete"
#: Heads the digest of a turn's calls and results, folded into the user message.
RESULTS_HEADER = "\n\nTool results for this question:\n"
#: Said of a call that did not run yet, because it needs a value from results the model now has.
WAITING = "write this call again now, with the value from the results"
#: Said of a call written with a slot (``<secret_code>``) for a value it does not have yet.
SLOT = "{slots} stands where a value belongs: " + WAITING
#: Said of a call that changes something, written in one list after calls that look something up.
HELD = "this call changes something, so it waits for the results of the calls before it: " + WAITING
#: Added to an earlier result given again for a call repeated with the same arguments (C10).
ALREADY_RUN = "\n(This call already ran in this turn with the same arguments: this is its result again.)"
#: How the digest lists such a repeat (``repeat_once``): its result is the line above, not written twice.
REPEATED = "was a repeat of a call above: the same result"


# --- document summaries ------------------------------------------------------------------------------------

#: The summarizer's instruction for each section; ``{words}`` is the key points' length.
SECTION_PROMPT = (
    "You summarize a long document one section at a time. Write the key points of everything read so "
    "far: the earlier key points, updated with this section. Facts, figures and names only, as short "
    "bullet points, at most {words} words."
)

#: A document short enough to read whole is given whole (as AnythingLLM does); the request for its key points
#: is spelled out, since the 1.5B otherwise answered with what the tool did instead of what the text says.
WHOLE_DOCUMENT = (
    "{title} is short enough to read whole; its full text follows. Answer with its key points (names, "
    "figures, prices, dates) as short bullet points, not with a description of this tool.\n\n{text}"
)


# --- the memory job --------------------------------------------------------------------------------------

#: The observer: what in a batch of chats is worth remembering.
OBSERVER_PROMPT = """\
You help an assistant remember its user between conversations. Below are recent conversations between \
the user and the assistant. Note what would still be useful to know about the user weeks from now.

Worth noting: the user's name (always, when they give it), their role or occupation, the projects they \
work on, the tools, languages and conventions they use, and lasting preferences about how they want to be \
answered. Not worth noting: one-off questions or tasks, anything the assistant said or believes, moods, \
greetings and thanks, and secrets such as passwords, keys or account numbers.

Write each fact as one short, self-contained sentence about "the user". Give at most 3 facts, the most \
useful first, each with a confidence: "high" when the user said it plainly, "medium" when it is strongly \
implied, "low" when it is a guess.

Reply with JSON only, in this form:
{"observations": [{"content": "The user ...", "confidence": "high"}]}
Reply {"observations": []} when nothing is worth remembering."""

#: The reflector: which candidates become memories, and where.
REFLECTOR_PROMPT = """\
You keep a small, tidy set of memories about a user. You are given candidate facts from recent \
conversations and the memories already kept. Decide which candidates to keep and where.

Scope: "global" for facts that hold in every workspace (name, role, language, general preferences); \
"workspace" for facts tied to this workspace's subject or project.
Kept memories: if a candidate says nothing new, leave it out. If it corrects or sharpens a kept memory, \
return an "update" with that memory's id and the full new text, instead of a second memory.
Confidence: keep "low" candidates only when they are about who the user is; keep "medium" ones only when \
they are lasting preferences; "high" ones when they are worth remembering at all.
Space: never create more memories of a scope than it has free slots.

Reply with JSON only, in this form:
{"memories": [{"action": "create", "scope": "workspace", "content": "The user ..."}, \
{"action": "update", "scope": "global", "update_id": 12, "content": "The user ..."}]}
Reply {"memories": []} when nothing should change."""
#: Asked of the model once when its answer after tool results states figures that no source holds, or shows
#: a call or the results' digest (G3); ``problem`` says which.
ASK_AGAIN_FIGURES = (
    "You answered: {answer!r}\n"
    "That {problem}.\n"
    "{results}\n"
    "Answer the question again in one or two plain sentences, stating only figures these results, the "
    "question or the documents give, without code."
)
#: The problems ``ASK_AGAIN_FIGURES`` names.
STRAY_FIGURES = "states {figures}, which neither the tool results nor the question nor the documents hold"
SHOWS_MACHINERY = "shows a tool call or the tools' raw results, which the person must never read"
NO_RESULT_STATED = "states no figure, though the question was answered by computing one"
#: What a person reads when an agent turn that ran no tool answered twice with a call written as text.
NO_PLAIN_ANSWER = "I could not put this answer into plain words. Please ask again, perhaps more simply."
#: Heads the tool results as a person reads them, when a turn's answer is given in the tools' own words.
RESULTS_IN_WORDS = "The tools returned:\n"
#: How ``search_documents`` heads its passages for the model, and labels each one: ``results_in_words``
#: reads them back as a person would (the passage and its document, without the query or the scores).
SEARCH_HEAD = 'Additional context for query "{query}":'
SEARCH_HIT = "[{index}] {title} (similarity {similarity:.2f})"
#: Stands in the results' digest for a passage the prompt's document context holds already
#: (``given_passages_once``): the 1.5B read the same three passages twice in one prompt, and the person's
#: question then stood two pages above the ask.
PASSAGE_GIVEN = "(the same passage as in the context above)"
#: Opens the answer to a write whose arguments state figures no source holds (G3, ``approve``).
STRAY_WRITE = "Not run (figures)"
#: Opens the answer to a write whose arguments copy the loop's own words (G3, ``approve``).
LOOP_WRITE = "Not run (instructions copied)"
#: Closes both: what the model is to do.
WRITE_AGAIN = "Write the call again with the figures from these results."
#: Answers a ``calculate`` call that starts from a figure no source of the turn holds (G3, ``approve``).
NOT_GIVEN_RUN = "Not run (figures not given)"
UNSOURCED_CALCULATION = (
    NOT_GIVEN_RUN + ": {figures} is in no tool result, document or question of this turn, so the result "
    "would be made up. Find the figure with a tool that looks it up, or tell the person it is not known."
)
#: What the person reads when a calculation was refused for that, no tool gave a result and the answer still
#: states a figure no source holds: a plain statement, not a guess.
NOT_GIVEN = (
    "I could not find the figures this needs in the documents or in your question, so I cannot work it out."
)

#: What the person reads of a run stopped at its time limit (a scheduled job's, ``Context.time_limit``).
TIMED_OUT = "This run stopped at its time limit of {limit:g} s, before it had an answer."
