"""The command line driven as a person would: a terminal, a question, an approval card, an answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect

CLI = str(Path(sys.executable).with_name("workspace-agent"))


def test_chat_asks_for_approval_at_the_terminal_and_answers(database_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": database_url, "COLUMNS": "120"}
    env.pop("OPENAI_BASE_URL", None)
    child = pexpect.spawn(
        CLI,
        ["--demo", "--workspace", "cli-test", "--set", "auto_approved=[]", "chat"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect("adding the sample documents")
        child.expect("SCRIPTED DEMO SERVER")
        child.expect("you")
        child.sendline("what time is it?")
        child.expect("Model wants to call")
        child.expect("current_datetime")
        child.expect(r"approve / edit / reject / always")
        child.sendline("a")
        child.expect("The tool answered: 20")
        child.expect("you")
        child.sendline("what do the docs say about pricing plans?")
        child.expect("search_documents")
        child.expect(r"approve / edit / reject / always")
        child.sendline("a")
        child.expect("The tool answered:")
        child.expect(r"source: pricing\.md \(0\.\d+\)")
        child.expect("you")
        child.sendline("/decisions")
        child.expect("decisions of the last turn")
        child.expect("D3")
        child.expect("person")
        child.expect("you")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def cli(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the command as a script would, on the test database, with no model endpoint configured."""
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run([CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ask_prints_the_answer_and_exits_zero(database_url, tmp_path):
    done = cli(database_url, tmp_path, "--demo", "ask", "hello there")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(scripted model) You said: hello there"


def test_ask_fails_with_a_clear_error_and_nonzero_exit(database_url, tmp_path):
    done = cli(database_url, tmp_path, "--demo", "--set", "history_limit=-2", "ask", "hi")
    assert done.returncode == 1
    assert "'history_limit' must be from 0" in done.stderr and "Traceback" not in done.stderr
    done = cli(database_url, tmp_path, "--demo", "ask", "   ")
    assert done.returncode == 1 and "empty" in done.stderr


def test_memory_commands_are_wired(database_url, tmp_path):
    done = cli(database_url, tmp_path, "--user", "nobody-here", "memory", "list")
    assert done.returncode == 0, done.stderr
    assert "no memories" in done.stdout
    done = cli(database_url, tmp_path, "memory", "delete", "999999999")
    assert done.returncode != 0


def test_ingest_and_docs_commands(database_url, tmp_path):
    (tmp_path / "notes.md").write_text("# Notes\n\nThe blue door opens at nine.\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")

    def docs(*args: str) -> subprocess.CompletedProcess:
        return cli(database_url, tmp_path, "--workspace", "cli-docs", *args)

    done = docs("ingest", "notes.md", "broken.pdf")
    assert done.returncode == 1, "a file that cannot be parsed makes the command fail"
    assert "broken.pdf" in done.stdout and "1 added" in done.stdout
    done = docs("docs", "list")
    assert done.returncode == 0 and "notes.md" in done.stdout
    assert docs("docs", "pin", "notes.md").returncode == 0
    assert docs("docs", "remove", "no-such-doc").returncode == 1
    assert docs("docs", "remove", "notes.md").returncode == 0
    assert "notes.md" not in docs("docs", "list").stdout


def test_chat_answers_the_models_question_at_the_terminal(database_url, tmp_path, llm):
    """``ask_person`` at the terminal: the question, its numbered choices; the pick is the call's result."""
    from workspace_agent.samples.scripted_model import text_reply, tool_reply

    question = {"question": "Which office should the trip go to?", "choices": ["Lisbon", "Porto"]}
    llm.push(tool_reply(("ask_person", question)), text_reply("Booked for Porto."))
    env = {**os.environ, "DATABASE_URL": database_url, "COLUMNS": "120", "OPENAI_BASE_URL": llm.base_url}
    env |= {"OPENAI_API_KEY": "test", "CHAT_MODEL": "scripted"}
    child = pexpect.spawn(
        CLI, ["--workspace", "cli-question", "chat"], env=env, cwd=str(tmp_path), encoding="utf-8", timeout=60
    )
    try:
        child.expect("you")
        child.sendline("book my trip")
        child.expect("The model asks you")
        child.expect("Which office should the trip go to")
        child.expect("2. Porto")
        child.expect("your choice")
        child.sendline("2")
        child.expect("Booked for Porto.")
        child.expect("you")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["Porto"]
