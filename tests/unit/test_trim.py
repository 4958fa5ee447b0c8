"""B11 as a pure function: shares of the window, middle cuts, order, tool messages kept with their calls."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from workspace_agent.core.context import Context
from workspace_agent.core.plan import assemble, render_system
from workspace_agent.nodes.trim import build_prompt
from workspace_agent.providers.tokens import count, count_messages, cut_middle

MARKER = "--prompt truncated for brevity--"


def history(n: int, pad: str = "") -> list:
    """``n`` earlier exchanges of a thread, as the thread's messages hold them."""
    return [m for i in range(n) for m in (HumanMessage(f"q{i}{pad}"), AIMessage(f"a{i}{pad}"))]


def test_everything_that_fits_is_untouched_and_in_order():
    ctx = Context(context_window=8192)
    messages = [*history(3), HumanMessage("now", id="u")]
    plan, summary = build_prompt(ctx, messages, ["likes tea"], ["doc text"])
    out = assemble(plan, messages)
    assert summary["cut"] is False
    assert [m.content for m in out[1:-1]] == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert out[0].content == render_system(ctx), "the system prompt alone: it stays the same"
    last = out[-1].content
    assert last.startswith("Things I remember about you:\n- likes tea") and last.endswith("now")
    assert "[CONTEXT 0]:\ndoc text\n[END CONTEXT 0]" in last and "doc text" not in out[0].content
    assert "likes tea" not in out[0].content, "what changes per turn comes after what stays the same"


def test_history_keeps_the_newest_that_fit_in_chronological_order():
    ctx = Context(context_window=2000, reply_reserve=100, history_limit=30)
    messages = [*history(30, " filler" * 10), HumanMessage("word " * 1200, id="u")]
    plan, _ = build_prompt(ctx, messages, [], [])
    kept = plan["history"]
    assert kept == sorted(kept) and kept[-1] == 29 and 0 < len(kept) < 30
    assert kept == list(range(30 - len(kept), 30)), "a contiguous run of the newest exchanges"
    assert count_messages(assemble(plan, messages)) <= 2000 - 100


def test_the_three_newest_exchanges_are_cut_before_being_dropped():
    ctx = Context(context_window=4000, reply_reserve=100)
    messages = [HumanMessage("p " * 2000), AIMessage("r " * 2000), HumanMessage("hi", id="u")]
    plan, _ = build_prompt(ctx, messages, [], [])
    assert len(plan["history"]) == 1 and isinstance(plan["history"][0], list)
    assert MARKER in plan["history"][0][0]


def test_a_huge_user_message_goes_alone_at_most_80_percent():
    ctx = Context(context_window=1000)
    messages = [*history(5), HumanMessage("x y " * 3000, id="u")]
    plan, summary = build_prompt(ctx, messages, [], ["ctx"])
    out = assemble(plan, messages)
    assert len(out) == 1 and isinstance(out[0], HumanMessage) and summary["user_alone"]
    assert count(out[0].content) <= 800


def test_tool_results_are_cut_never_dropped_and_follow_their_call():
    ctx = Context(context_window=3000)
    call = [{"name": "t", "args": {}, "id": f"c{i}", "type": "tool_call"} for i in range(3)]
    turn = [
        HumanMessage("go", id="u"),
        AIMessage("", tool_calls=call),
        *[ToolMessage("z " * 3000, tool_call_id=f"c{i}") for i in range(3)],
    ]
    plan, summary = build_prompt(ctx, [*history(4), *turn], [], [])
    out = assemble(plan, [*history(4), *turn])
    assert count_messages(out) <= 3000 - 600
    assert [type(m) for m in out[-4:]] == [AIMessage, ToolMessage, ToolMessage, ToolMessage]
    assert [m.tool_call_id for m in out[-3:]] == ["c0", "c1", "c2"]
    assert all(MARKER in m.content for m in out[-3:]) and summary["tool_results_cut"] == 3


def test_an_over_share_system_prompt_keeps_both_ends():
    ctx = Context(context_window=2000, system_prompt="START " + "rule " * 2000 + "FINISH")
    turn = [HumanMessage("hello", id="u")]
    plan, summary = build_prompt(ctx, turn, [], ["c " * 2000])
    system = assemble(plan, turn)[0]
    assert isinstance(system, SystemMessage) and summary["system_cut"]
    assert system.content.startswith("START") and MARKER in system.content
    assert count(system.content) <= 0.15 * 2000 + 30


def test_cut_middle_hits_its_target_and_leaves_short_text_alone():
    text = " ".join(f"w{i}" for i in range(2000))
    cut = cut_middle(text, 100)
    assert count(cut) <= 105 and cut.startswith("w0") and cut.endswith("w1999") and MARKER in cut
    assert cut_middle("short", 100) == "short"
