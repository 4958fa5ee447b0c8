"""G3 end to end: an answer that states a figure its tools contradict is asked again, never kept as fact.

The scripted OpenAI-compatible server plays the 1.5B of issue 33: ``calculate`` returns 720 and the model
answers 60. The real graph on the embedded PostgreSQL checks the answer's figures against the tool results,
the prompt and the question, and records each step as a G3 decision.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from tests.support.helpers import decisions_of, user_message
from workspace_agent.core.context import Context
from workspace_agent.core.figures import LOOP_TEXT, problems
from workspace_agent.core.prompts import (
    ASK_NEXT_STEP,
    LOOP_WRITE,
    NAMED_UNUSED,
    NOT_GIVEN,
    NOT_GIVEN_RUN,
    PASSAGE_GIVEN,
)
from workspace_agent.graphs.agent import build_graph
from workspace_agent.samples.scripted_model import text_reply, tool_reply

QUESTION = "@agent what would 5 installations of the Team plan cost per year? It is 12 EUR a month."
CALCULATE = tool_reply(("calculate", {"expression": "(12 * 12) * 5"}))


async def turn(
    llm, saver, workspace, thread, *replies, question: str = QUESTION, first: dict = CALCULATE
) -> dict:
    llm.push(first, *replies)
    graph = build_graph(checkpointer=saver)
    return await graph.ainvoke(user_message(question), thread, context=Context(workspace=workspace))


async def test_a_figure_the_tools_contradict_is_asked_again_and_the_second_answer_kept(
    llm, saver, workspace, thread
):
    out = await turn(
        llm, saver, workspace, thread,
        text_reply("5 installations of the Team plan cost 60 EUR per year."),
        text_reply("5 installations of the Team plan cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "5 installations of the Team plan cost 720 EUR per year."
    assert [m.content for m in out["messages"] if isinstance(m, AIMessage) and "60 EUR" in m.content] == []
    asked, answered = decisions_of(out, "G3")
    assert asked["outcome"] == {"asked_again": [60.0]} and asked["decided_by"] == "code"
    assert answered["outcome"] == "answered again" and answered["decided_by"] == "model"
    again = llm.requests[-1]
    assert "tools" not in again or not again["tools"], "asked again without tools"
    ask = again["messages"][-1]["content"]
    assert "60" in ask and "calculate: 720" in ask, "the difference and the results are named"


async def test_when_the_second_answer_still_disagrees_the_person_reads_the_results(
    llm, saver, workspace, thread
):
    out = await turn(
        llm, saver, workspace, thread,
        text_reply("That is 60 EUR per year."),
        text_reply("Sorry: it is 84 EUR per year."),
    )  # fmt: skip
    answer = out["messages"][-1].content
    assert answer == "The tools returned:\n- calculate: 720"
    assert "60" not in answer and "84" not in answer
    assert decisions_of(out, "G3")[-1]["outcome"] == "results shown"
    assert out["stop_reason"] == "answered"


async def test_the_results_in_words_show_a_repeated_calls_result_once_and_no_note_of_the_repeat(
    llm, saver, workspace, thread
):
    out = await turn(
        llm, saver, workspace, thread,
        CALCULATE,  # the 1.5B's habit: the same call again after its result
        text_reply("That is 60 EUR per year."),
        text_reply("Sorry: it is 84 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "The tools returned:\n- calculate: 720"


async def test_an_answer_that_agrees_is_kept_with_one_model_call(llm, saver, workspace, thread):
    out = await turn(llm, saver, workspace, thread, text_reply("It costs 720 EUR a year for all 5."))
    assert out["messages"][-1].content == "It costs 720 EUR a year for all 5."
    assert [d["outcome"] for d in decisions_of(out, "G3")] == ["agrees"]
    assert len(llm.requests) == 2


async def test_an_answer_without_tool_results_is_not_checked(llm, saver, workspace, thread):
    llm.push(text_reply("Paris has about 2,100,000 inhabitants."))
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(
        user_message("@agent How big is Paris?"), thread, context=Context(workspace=workspace)
    )
    assert out["messages"][-1].content == "Paris has about 2,100,000 inhabitants."
    assert decisions_of(out, "G3") == []


async def test_an_answer_that_copies_the_results_digest_is_asked_again(llm, saver, workspace, thread):
    out = await turn(
        llm, saver, workspace, thread,
        text_reply('- calculate({"expression": "(12 * 12) * 5"}) returned: 720'),
        text_reply("Five installations cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "Five installations cost 720 EUR per year."
    assert decisions_of(out, "G3")[0]["outcome"] == {"asked_again": [], "machinery": True}


async def test_a_year_read_from_the_clock_is_a_given_figure(llm, saver, workspace, thread):
    llm.push(
        tool_reply(("current_datetime", {})),
        tool_reply(("calculate", {"expression": "2050 - 2026"})),
        text_reply("It is 2026 now, on December 4, and 24 years are left until 2050."),
    )
    graph = build_graph(checkpointer=saver)
    question = "@agent What year is it, and how many years are left until 2050?"
    out = await graph.ainvoke(user_message(question), thread, context=Context(workspace=workspace))
    assert out["messages"][-1].content.startswith("It is 2026 now")
    assert [d["outcome"] for d in decisions_of(out, "G3")] == ["agrees"]


async def test_a_note_stating_a_figure_the_tools_contradict_is_sent_back_before_any_card(
    llm, saver, workspace, thread
):
    llm.push(
        CALCULATE,
        tool_reply(("save_note", {"text": "5 installations of the Team plan cost 60 EUR per year."})),
        tool_reply(("save_note", {"text": "5 installations of the Team plan cost 720 EUR per year."})),
        text_reply("Saved: 720 EUR per year."),
    )
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(user_message(QUESTION), thread, context=Context(workspace=workspace))
    (card,) = out["__interrupt__"]
    assert [a["args"]["text"] for a in card.value["action_requests"]] == [
        "5 installations of the Team plan cost 720 EUR per year."
    ], "the note with 60 never reached a card"
    sent_back = llm.requests[2]["messages"][-1]
    assert (
        sent_back["role"] == "tool"
        and "60" in sent_back["content"]
        and "calculate: 720" in sent_back["content"]
    )
    (check,) = [d for d in decisions_of(out, "G3")]
    assert list(check["outcome"].values()) == [{"stray": [60.0]}]


async def test_a_note_copying_the_loops_own_ask_is_sent_back_before_any_card(llm, saver, workspace, thread):
    """The 1.5B saved a note of the next-step ask ("... Check every part of the question. ..."), unread."""
    copied = f"Team plan notes: {NAMED_UNUSED.format(tools='save_note')}{ASK_NEXT_STEP}"
    llm.push(
        CALCULATE,
        tool_reply(("save_note", {"text": copied})),
        tool_reply(("save_note", {"text": "5 installations of the Team plan cost 720 EUR per year."})),
    )
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(user_message(QUESTION), thread, context=Context(workspace=workspace))
    (card,) = out["__interrupt__"]
    assert [a["args"]["text"] for a in card.value["action_requests"]] == [
        "5 installations of the Team plan cost 720 EUR per year."
    ], "the note with the ask never reached a card"
    sent_back = llm.requests[2]["messages"][-1]
    assert sent_back["role"] == "tool" and sent_back["content"].startswith(LOOP_WRITE)
    assert "calculate: 720" in sent_back["content"]
    (check,) = decisions_of(out, "G3")
    assert list(check["outcome"].values()) == [{"copied": "which this turn has not used yet"}]


async def test_an_answer_quoting_the_loops_own_ask_is_asked_again(llm, saver, workspace, thread):
    out = await turn(
        llm, saver, workspace, thread,
        text_reply(f"720 EUR per year. {ASK_NEXT_STEP}"),
        text_reply("Five installations cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "Five installations cost 720 EUR per year."
    assert decisions_of(out, "G3")[0]["outcome"] == {"asked_again": [], "machinery": True}


async def test_a_write_sent_back_once_goes_to_the_person_as_written_the_second_time(
    llm, saver, workspace, thread
):
    wrong = tool_reply(("save_note", {"text": "It costs 60 EUR per year."}))
    llm.push(CALCULATE, wrong, wrong)
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(user_message(QUESTION), thread, context=Context(workspace=workspace))
    (card,) = out["__interrupt__"]
    assert card.value["action_requests"][0]["args"] == {"text": "It costs 60 EUR per year."}
    assert len(decisions_of(out, "G3")) == 1, "sent back once; the person decides the second time"


async def test_an_answer_cut_off_by_the_limit_is_checked_too(llm, saver, workspace, thread):
    digest = '- calculate({"expression": "(12 * 12) * 5"}) returned: 720\n- calculate({"expression": "(12'
    out = await turn(
        llm, saver, workspace, thread,
        text_reply(digest, finish_reason="length"),
        text_reply("They cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "They cost 720 EUR per year."
    assert out["stop_reason"] == "max_tokens"
    assert decisions_of(out, "G3")[0]["outcome"]["machinery"] is True


async def test_an_answer_written_as_a_call_is_asked_again(llm, saver, workspace, thread):
    out = await turn(
        llm, saver, workspace, thread,
        text_reply('- save_note({"text": "5 installations cost 720 EUR per year."})'),
        text_reply("Five installations cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "Five installations cost 720 EUR per year."
    assert decisions_of(out, "G3")[0]["outcome"] == {"asked_again": [], "machinery": True}


PLAN_PRICE = "The Team plan costs 120 EUR a year per installation."
YEARLY = "@agent what would 5 installations of the Team plan cost per year? save it as a note"


async def test_a_note_stating_an_input_of_the_sum_instead_of_its_result_is_sent_back(
    llm, saver, workspace, thread
):
    """The 1.5B saved "… cost 120 EUR per year" where ``calculate("5 * 120")`` returned 600 (fresh-clone CI).

    120 is held by a source (here the prompt), so the check of unsupported figures lets it pass; stating an
    input of the turn's calculation and none of its results is sent back once, naming the result.
    """
    llm.push(
        tool_reply(("calculate", {"expression": "5 * 120"})),
        tool_reply(("save_note", {"text": "5 installations of the Team plan cost 120 EUR per year."})),
        tool_reply(("save_note", {"text": "5 installations of the Team plan cost 600 EUR per year."})),
    )
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, system_prompt=PLAN_PRICE)
    out = await graph.ainvoke(user_message(YEARLY), thread, context=context)
    (card,) = out["__interrupt__"]
    assert [a["args"]["text"] for a in card.value["action_requests"]] == [
        "5 installations of the Team plan cost 600 EUR per year."
    ]
    sent_back = llm.requests[2]["messages"][-1]
    assert sent_back["role"] == "tool" and "not its result 600" in sent_back["content"], sent_back
    (check,) = decisions_of(out, "G3")
    assert list(check["outcome"].values()) == [{"operand": [120.0]}]


async def test_a_note_of_the_questions_own_figures_after_a_sum_is_not_sent_back(
    llm, saver, workspace, thread
):
    llm.push(
        tool_reply(("calculate", {"expression": "5 * 120"})),
        tool_reply(("save_note", {"text": "Plan the 5 installations of the Team plan."})),
    )
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, system_prompt=PLAN_PRICE)
    out = await graph.ainvoke(user_message(YEARLY), thread, context=context)
    (card,) = out["__interrupt__"]
    assert card.value["action_requests"][0]["args"]["text"] == "Plan the 5 installations of the Team plan."
    assert decisions_of(out, "G3") == []


PLANNED = (
    "To answer this I will use the `calculate` tool. Here is the call:\n\n"
    '```json\n[{"name": "calculate", "arguments": {"expression": "(12 * 12) * 5"}}]\n```\n'
)


async def no_tool_turn(llm, saver, workspace, thread, question, *replies, mode: str = "automatic") -> dict:
    llm.push(*replies)
    graph = build_graph(checkpointer=saver)
    context = Context(workspace=workspace, chat_mode=mode)
    return await graph.ainvoke(user_message(question), thread, context=context)


async def test_a_call_written_into_an_answer_that_ran_no_tool_is_asked_again(llm, saver, workspace, thread):
    """An agent turn that calls nothing but writes a call as JSON: the person never reads the JSON."""
    out = await no_tool_turn(
        llm,
        saver,
        workspace,
        thread,
        QUESTION,
        text_reply(PLANNED),
        text_reply("It would cost 720 EUR a year."),
    )
    assert out["messages"][-1].content == "It would cost 720 EUR a year."
    asked, answered = decisions_of(out, "G3")
    assert asked["outcome"] == {"machinery": True} and answered["outcome"] == "answered again"
    assert "tools" not in llm.requests[-1] or not llm.requests[-1]["tools"], "asked again without tools"


async def test_when_the_second_answer_writes_a_call_too_the_person_reads_the_words_before_it(
    llm, saver, workspace, thread
):
    out = await no_tool_turn(
        llm, saver, workspace, thread, QUESTION, text_reply(PLANNED), text_reply(PLANNED)
    )
    assert out["messages"][-1].content == "To answer this I will use the `calculate` tool."
    assert decisions_of(out, "G3")[-1]["outcome"] == "cut at the call"


async def test_a_call_of_a_tool_nobody_offered_written_into_an_answer_is_cut_too(
    llm, saver, workspace, thread
):
    """Offered no tool, the 1.5B answered with a call of a "wikipedia" tool as JSON after its words."""
    words = "To answer this question, I need to look up the author. I can use the Wikipedia tool to do this."
    invented = f'{words} [{{"name": "wikipedia", "arguments": {{"query": "1984"}}}}]'
    out = await no_tool_turn(
        llm,
        saver,
        workspace,
        thread,
        "@agent Who wrote the novel 1984?",
        text_reply(invented),
        text_reply(invented),
    )
    assert out["messages"][-1].content == words, "the person reads the words, never the call"
    assert decisions_of(out, "G3")[-1]["outcome"] == "cut at the call"


async def test_code_in_a_chat_answer_is_the_answer(llm, saver, workspace, thread):
    """JSON that calls none of the turn's tools, or any in a chat turn, is the person's answer as written."""
    code = 'Use this:\n```json\n{"name": "Ann", "age": 30}\n```'
    out = await no_tool_turn(
        llm, saver, workspace, thread, "@agent Show me a JSON object for Ann.", text_reply(code)
    )
    assert out["messages"][-1].content == code and decisions_of(out, "G3") == []
    question = "How is a call written?"
    chat = await no_tool_turn(llm, saver, workspace, thread, question, text_reply(PLANNED), mode="chat")
    assert chat["messages"][-1].content == PLANNED, "a chat turn offers no tools: nothing of it is a call"


async def test_a_search_passage_label_copied_into_the_answer_is_machinery(llm, saver, workspace, thread):
    """With history the 1.5B copied "[2] faq.md (similarity 0.55)" and its passage into an answer."""
    copied = (
        "After searching I find:\n\n[1] pricing.md (similarity 0.61)\nTeam: 12 EUR a month. It costs 720."
    )
    out = await turn(
        llm, saver, workspace, thread, text_reply(copied), text_reply("It costs 720 EUR a year.")
    )
    assert out["messages"][-1].content == "It costs 720 EUR a year."
    assert decisions_of(out, "G3")[0]["outcome"] == {"asked_again": [], "machinery": True}


async def test_an_answer_closing_with_an_empty_list_of_calls_is_shown_without_it(
    llm, saver, workspace, thread
):
    """The 1.5B answered in prose, then "The answer is:" and a fenced ``[]``, its catalog's "no call"."""
    prose = "The documents give the support time as 4 hours, which is 14400 seconds."
    closing = f"{prose}\n\nTherefore, the answer is:\n```json\n[]\n```"
    out = await no_tool_turn(llm, saver, workspace, thread, QUESTION, text_reply(closing))
    assert out["messages"][-1].content == prose
    assert decisions_of(out, "G3")[0]["outcome"] == "empty call list cut"
    assert len(llm.requests) == 1, "cut by code: no model call more"

    bare = await no_tool_turn(llm, saver, workspace, thread, QUESTION, text_reply(f"{prose} []"))
    assert bare["messages"][-1].content == prose

    code = await no_tool_turn(
        llm, saver, workspace, thread, "@agent Show me an empty JSON list.", text_reply("[]")
    )
    assert code["messages"][-1].content == "[]", "nothing but the list: no words to keep, the reply stands"


async def test_the_delimiters_of_the_document_texts_never_reach_the_person(llm, saver, workspace, thread):
    """With history the 1.5B closed an answer in prose with "[END CONTEXT 3]", its prompt's layout."""
    prose = "The Team plan costs 12 EUR a month."
    for question, mode in (
        ("@agent What does the Team plan cost?", "automatic"),
        ("Team plan price?", "chat"),
    ):
        copied = f"Context:\n[CONTEXT 0]:\n{prose}\n\n[END CONTEXT 3]"
        out = await no_tool_turn(llm, saver, workspace, thread, question, text_reply(copied), mode=mode)
        assert out["messages"][-1].content == prose, mode
        assert decisions_of(out, "G3")[0]["outcome"] == "delimiters cut"
    assert len(llm.requests) == 2, "cut by code: one model call a turn"

    header = "<document_metadata>\nsourceDocument: pricing.md\n</document_metadata>\n\n"
    copied = f"I looked at the documents.\n\nThe relevant context is:\n\n{header}{prose}"
    out = await no_tool_turn(
        llm, saver, workspace, thread, "Team plan price?", text_reply(copied), mode="chat"
    )
    assert out["messages"][-1].content == f"I looked at the documents.\n\n{prose}", (
        "a header copied is cut too"
    )
    assert len(llm.requests) == 3

    alone = await no_tool_turn(
        llm, saver, workspace, thread, "Team plan price?", text_reply("[END CONTEXT 0]")
    )
    assert alone["messages"][-1].content == "[END CONTEXT 0]", "nothing but delimiters: no words to keep"


async def test_a_note_holding_a_delimiter_is_machinery_for_the_write_check_too():
    stray, shows = problems("Team plan: 12 EUR a month. [END CONTEXT 0]", "Team: 12 EUR a month.")
    assert (stray, shows) == ([], True)
    assert problems("Team plan: 12 EUR a month.", "Team: 12 EUR a month.") == ([], False)


async def test_an_answer_that_states_none_of_the_computed_result_is_asked_again(
    llm, saver, workspace, thread
):
    """With history the 1.5B answered "What is 15 percent of 640?" with "The calculation is done."."""
    out = await turn(
        llm, saver, workspace, thread,
        text_reply("The calculation is done."),
        text_reply("5 installations cost 720 EUR per year."),
    )  # fmt: skip
    assert out["messages"][-1].content == "5 installations cost 720 EUR per year."
    asked, answered = decisions_of(out, "G3")
    assert asked["outcome"] == {"result_unstated": True} and answered["outcome"] == "answered again"
    assert "calculate: 720" in llm.requests[-1]["messages"][-1]["content"], "the result is named"

    again = await turn(
        llm, saver, workspace, thread,
        text_reply("The calculation is done."),
        text_reply("Yes, I worked it out for you."),
    )  # fmt: skip
    assert again["messages"][-1].content == (
        "Yes, I worked it out for you.\n\nThe tools returned:\n- calculate: 720"
    ), "still no figure: the words are kept and the result follows them"
    assert decisions_of(again, "G3")[-1]["outcome"] == "results added"


async def test_an_answer_stating_the_questions_figure_after_a_calculation_is_not_asked_again(
    llm, saver, workspace, thread
):
    llm.push(tool_reply(("calculate", {"expression": "17 % 2"})), text_reply("Yes, 17 is a prime number."))
    graph = build_graph(checkpointer=saver)
    out = await graph.ainvoke(
        user_message("@agent Is 17 a prime number?"), thread, context=Context(workspace=workspace)
    )
    assert out["messages"][-1].content == "Yes, 17 is a prime number."
    assert [d["outcome"] for d in decisions_of(out, "G3")] == ["agrees"]


async def test_a_listed_passage_with_its_score_or_the_digests_note_is_machinery():
    """With history the 1.5B listed "1. troubleshooting.txt (similarity 0.60) (the same passage as ...)"."""
    source = "Lanternfish keeps the first 2 KB of the error."
    listed = "Lanternfish keeps: 1. troubleshooting.txt (similarity 0.60) and 2. faq.md: the first 2 KB."
    assert problems(listed, source) == ([], True)
    assert problems(f"It keeps 2 KB {PASSAGE_GIVEN}.", source) == ([], True)
    assert problems("It keeps the first 2 KB of the error (the FAQ says so).", source) == ([], False)


def test_the_loops_own_words_are_told_apart_from_a_persons():
    """What sends a write back: the prompt's asks and layout, never JSON or words a person writes too."""
    assert LOOP_TEXT.search("From the guide [END CONTEXT 2]: 12 EUR a month.")
    assert LOOP_TEXT.search(f"Note. {ASK_NEXT_STEP}") and LOOP_TEXT.search(NAMED_UNUSED.format(tools="x"))
    assert not LOOP_TEXT.search('{"name": "weekly report", "rows": 3}'), "JSON a person may ask to save"
    assert not LOOP_TEXT.search("Check every part of the engine before the trip.")


PRICE_UNKNOWN = "@agent What do 3 Lanternfish Team installations cost per month?"


async def unsourced_turn(llm, saver, workspace, thread, *replies) -> dict:
    """The dev server's finding: no document holds a price, and the model makes one up to compute with."""
    made_up = tool_reply(("calculate", {"expression": "3 * 100"}))
    return await turn(llm, saver, workspace, thread, *replies, question=PRICE_UNKNOWN, first=made_up)


async def test_a_calculation_from_a_figure_no_source_holds_is_not_run(llm, saver, workspace, thread):
    out = await unsourced_turn(
        llm, saver, workspace, thread,
        text_reply("3 installations cost 300 dollars per month."),
        text_reply("The documents do not give the Team plan's price, so I cannot say."),
    )  # fmt: skip
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [(m.name, m.status) for m in results] == [("calculate", "error")], "calculate never ran"
    refused = llm.requests[1]["messages"][-1]
    assert refused["role"] == "tool" and refused["content"].startswith(NOT_GIVEN_RUN)
    assert "100 is in no tool result" in refused["content"], "the made-up figure is named to the model"
    unsourced, asked, answered = decisions_of(out, "G3")
    assert list(unsourced["outcome"].values()) == [{"unsourced": [100.0]}]
    assert asked["outcome"] == {"asked_again": [300.0]}, "with no result, the answer's 300 is still checked"
    assert answered["outcome"] == "answered again"
    assert out["messages"][-1].content == "The documents do not give the Team plan's price, so I cannot say."


async def test_a_made_up_figure_stated_twice_is_never_shown(llm, saver, workspace, thread):
    out = await unsourced_turn(
        llm, saver, workspace, thread,
        tool_reply(("calculate", {"expression": "3 * 100"})),  # the same call again: refused again
        text_reply("3 installations cost 300 dollars per month."),
        text_reply("It is 300 dollars."),
    )  # fmt: skip
    assert [m.status for m in out["messages"] if isinstance(m, ToolMessage)] == ["error", "error"]
    withheld = [d for d in decisions_of(out, "G1") if d["outcome"] == "tools withheld"]
    assert len(withheld) == 1, "refused twice, the model is asked for its answer, not for a tenth calculation"
    assert not llm.requests[2].get("tools"), "the answer's request offers no tool"
    assert decisions_of(out, "G3")[-1]["outcome"] == "not given said"
    assert out["messages"][-1].content == NOT_GIVEN
    assert "300" not in out["messages"][-1].content and "100" not in out["messages"][-1].content


async def test_a_calculation_from_given_figures_and_units_runs(llm, saver, workspace, thread):
    question = "@agent Take fifteen percent of 640 and add 3 dozen per week for a year, in hundreds."
    given = tool_reply(("calculate", {"expression": "640 * 0.15 + 3 * 12 * 52 / 100"}))
    out = await turn(
        llm, saver, workspace, thread, text_reply("That makes 114.72."), question=question, first=given
    )
    assert [(m.name, m.status) for m in out["messages"] if isinstance(m, ToolMessage)] == [
        ("calculate", "success")
    ]
    assert out["messages"][-1].content == "That makes 114.72."
