"""The tool-loop agent through the real runner, against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json

import anyio
from click.testing import CliRunner
from conftest import Reply, completion, prompt_tokens, write_task

from clawsdk.cli import cli as cli_main
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.model import File, Limits
from clawsdk.tasks.native import save_task

WRITE = {"name": "write", "arguments": {"path": "hello.txt", "content": "hello world"}}


def run_loop(stub_server, tmp_path, task=None, run_retries=0, **options):
    opts = {"model": "openai:stub", "base_url": stub_server.base_url, "backoff_s": 0.01, **options}

    async def go():
        with anyio.fail_after(60):
            return await run([task or write_task()], agent="tool-loop", agent_options=opts, db=tmp_path / "s.db",
                             retries=run_retries, backoff_s=0.01, sandbox_config=None)

    result = anyio.run(go)
    (outcome,) = result.outcomes
    with Store(tmp_path / "s.db") as store:
        events = store.events(outcome.rollout_id)
        row = store.rollout(outcome.rollout_id)
    return outcome, events, row


def kinds(events):
    return [e["kind"] for e in events]


def test_malformed_calls_and_server_errors_do_not_stop_the_rollout(stub_server, tmp_path):
    stub_server.script = [
        Reply({"error": {"message": "rate limited"}}, 429),
        # a text call with broken JSON: goes back to the model as an error
        completion('I will write it.\n<tool_call>\n{"name": "write", "arguments": {"path": "hello.txt",\n</tool_call>'),
        Reply({"error": {"message": "internal"}}, 500),
        # a structured call whose arguments are not JSON
        completion(None, [{"name": "write", "arguments": '{"path": "hello.txt", "content": '}]),
        completion(None, [{"name": "no_such_tool", "arguments": {}}]),
        completion(None, [WRITE]),
        completion("All done: hello.txt holds the greeting."),
    ]
    outcome, events, row = run_loop(stub_server, tmp_path)
    assert outcome.kind.value == "ok" and outcome.passed and outcome.reward == 1.0
    assert row["model"] == "openai:stub" and row["n_model_calls"] == 5
    errors = [e["payload"] for e in events if e["kind"] == "error"]
    assert [e["kind"] for e in errors] == ["malformed_tool_call", "malformed_tool_call"]
    assert "not valid JSON" in errors[0]["message"] and "<tool_call>" in errors[0]["raw"]
    assert "not a JSON object" in errors[1]["message"]
    calls = [e["payload"] for e in events if e["kind"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["no_such_tool", "write"]
    assert kinds(events)[:2] == ["model_request", "model_response"]

    # what the model was told, turn by turn
    last = stub_server.requests[-1]["messages"]
    user_errors = [m["content"] for m in last if m["role"] == "user" and "could not be read" in m["content"]]
    assert len(user_errors) == 1 and "<tool_response>" in user_errors[0]
    tool_msgs = [m["content"] for m in last if m["role"] == "tool"]
    assert tool_msgs[0].startswith("error: the arguments of 'write' are not a JSON object")
    assert tool_msgs[1].startswith("error: unknown tool 'no_such_tool'")
    assert tool_msgs[2] == "wrote 11 bytes to hello.txt"
    first = stub_server.requests[0]
    assert first["messages"][1] == {"role": "user", "content": write_task().instruction}
    assert {t["function"]["name"] for t in first["tools"]} >= {"read", "write", "exec", "finish"}

    request = next(e["payload"] for e in events if e["kind"] == "model_request")
    assert request["params"]["max_tokens"] == 1024 and request["tools"] and request["messages"][0]["role"] == "system"
    response = next(e["payload"] for e in events if e["kind"] == "model_response")
    assert response["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}


def test_finish_tool_ends_the_rollout(stub_server, tmp_path):
    stub_server.script = [completion(None, [WRITE]), completion(None, [{"name": "finish", "arguments": {"summary": "ok"}}])]
    stub_server.default = completion(None, [{"name": "write", "arguments": {"path": "hello.txt", "content": "spoiled"}}])
    outcome, events, _ = run_loop(stub_server, tmp_path)
    assert outcome.passed and len(stub_server.requests) == 2
    assert {"event": "finish", "args": {"summary": "ok"}} in [e["payload"] for e in events if e["kind"] == "note"]


def test_a_model_that_never_stops_calling_tools_is_cut_at_max_turns(stub_server, tmp_path):
    stub_server.default = completion(None, [{"name": "ls", "arguments": {}}])
    outcome, events, row = run_loop(stub_server, tmp_path, max_turns=3)
    assert outcome.kind.value == "agent_timeout" and row["scored"] == 1 and outcome.passed is False
    assert "3 model turns" in outcome.error
    assert kinds(events).count("model_request") == 3


def test_the_rollout_token_budget_is_enforced(stub_server, tmp_path):
    stub_server.default = completion(None, [{"name": "ls", "arguments": {}}], usage=(10, 40))
    outcome, _, _ = run_loop(stub_server, tmp_path, max_rollout_tokens=100, max_tokens=64)
    assert outcome.kind.value == "agent_timeout" and "max_rollout_tokens" in outcome.error
    assert [r["max_tokens"] for r in stub_server.requests] == [64, 60, 20]


def test_a_hanging_server_is_an_unscored_model_error(stub_server, tmp_path):
    stub_server.default = Reply(hang=True)
    outcome, _events, row = run_loop(stub_server, tmp_path, turn_timeout_s=0.3, run_retries=1, retries=1)
    assert outcome.kind.value == "model_error" and row["scored"] == 0 and outcome.reward is None
    assert "no answer within 0.3 s" in outcome.error
    assert outcome.attempts == 2


def test_a_call_still_waiting_when_the_tasks_time_runs_out_is_the_agents_timeout(stub_server, tmp_path):
    # the task's time is the agent's, whatever keeps the model call waiting; never an unscored model_error
    stub_server.default = Reply(hang=True)
    task = write_task(limits=Limits(timeout_s=1.0, tool_timeout_s=10, verifier_timeout_s=20))
    outcome, events, row = run_loop(stub_server, tmp_path, task=task, retries=0, run_retries=2)
    assert outcome.kind.value == "agent_timeout" and row["scored"] == 1 and outcome.attempts == 1
    # the call's own limit would have ended it a moment after the task's deadline, not before
    request = next(e["payload"] for e in events if e["kind"] == "model_request")
    assert request["params"]["timeout_s"] > 1.0


def test_arguments_nested_too_deep_are_the_models_mistake_not_a_broken_tool_server(stub_server, tmp_path):
    # the MCP client cannot encode ~250 levels: that used to end the rollout sandbox_error, unscored
    deep = '{"command": "echo hi", "note": ' + "[" * 300 + "]" * 300 + "}"
    stub_server.script = [completion(None, [{"name": "exec", "arguments": deep}]), completion(None, [WRITE]),
                          completion("done")]
    outcome, events, _ = run_loop(stub_server, tmp_path, run_retries=2)
    assert outcome.kind.value == "ok" and outcome.passed and outcome.attempts == 1
    told = next(m["content"] for m in stub_server.requests[1]["messages"] if m["role"] == "tool")
    assert "nest deeper than 64 levels" in told
    call = next(e["payload"] for e in events if e["kind"] == "tool_call")
    assert call["tool"] == "exec" and "unreadable" in call["args"]


def test_long_tool_outputs_are_cut_with_a_note(stub_server, tmp_path):
    big = "".join(f"line {i:05d}\n" for i in range(3000))
    task = write_task(workspace=[File(path="big.log", text=big)])
    stub_server.script = [completion(None, [{"name": "read", "arguments": {"path": "big.log"}}]), completion(None, [WRITE]),
                          completion("done")]
    outcome, events, _ = run_loop(stub_server, tmp_path, task=task, max_tool_output_chars=1000)
    assert outcome.passed
    tool_msg = next(m for m in stub_server.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert len(tool_msg) < 1200 and "characters cut from the middle" in tool_msg
    assert tool_msg.startswith("line 00000") and tool_msg.endswith("[1000 more lines; read with offset=2001]")
    # the store keeps the full output
    result = next(e["payload"] for e in events if e["kind"] == "tool_result")
    assert len(result["content"]) > 20000


def test_old_tool_outputs_are_elided_past_the_context_budget(stub_server, tmp_path):
    task = write_task(workspace=[File(path="a.txt", text="A" * 3000), File(path="b.txt", text="B" * 3000)])
    stub_server.script = [completion(None, [{"name": "read", "arguments": {"path": "a.txt"}}]),
                          completion(None, [{"name": "read", "arguments": {"path": "b.txt"}}]),
                          completion(None, [WRITE]), completion("done")]
    outcome, _, _ = run_loop(stub_server, tmp_path, task=task, max_context_chars=5000)
    assert outcome.passed
    third = [m["content"] for m in stub_server.requests[2]["messages"] if m["role"] == "tool"]
    assert third[0].startswith("[output elided") and third[1].startswith("BBB")


def test_an_agent_that_reads_until_its_context_overflows_fails_scored(stub_server, tmp_path):
    # one read's output alone is past the server's window: nothing older to elide
    task = write_task(workspace=[File(path="big.log", text="L" * 20000)])
    stub_server.window = 2500
    stub_server.default = completion(None, [{"name": "read", "arguments": {"path": "big.log"}}])
    outcome, _events, row = run_loop(stub_server, tmp_path, task=task, run_retries=2)
    assert outcome.kind.value == "agent_error" and row["scored"] == 1 and outcome.reward == 0.0
    assert outcome.attempts == 1 and "maximum context length is 2500" in outcome.error


def test_old_outputs_are_elided_when_the_server_says_the_conversation_is_full(stub_server, tmp_path):
    task = write_task(workspace=[File(path=f"{n}.txt", text=n * 5000) for n in "abc"])
    # the third output takes the conversation past the window (the server's stub counts 4 characters a token)
    stub_server.window, stub_server.overflow_style = 3000, "vllm-input"
    stub_server.script = [completion(None, [{"name": "read", "arguments": {"path": f"{n}.txt"}}]) for n in "abc"]
    stub_server.script += [completion(None, [WRITE]), completion("done")]
    outcome, events, _ = run_loop(stub_server, tmp_path, task=task, max_tokens=16)
    assert outcome.passed and outcome.kind.value == "ok"
    errors = [e["payload"] for e in events if e["kind"] == "error"]
    assert [e["kind"] for e in errors] == ["context_overflow"]
    assert "maximum context length is 3000" in errors[0]["message"]
    tool_msgs = [m["content"] for m in stub_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0].startswith("[output elided") and tool_msgs[2].startswith("ccc")
    # the agent kept the budget it learnt: after the one overflow, every request fit
    overflowed = [i for i, q in enumerate(stub_server.requests) if prompt_tokens(q) + q["max_tokens"] > 3000]
    assert overflowed == [3] and len(stub_server.requests) == 6
    assert kinds(events).count("model_request") == 6 and kinds(events).count("model_response") == 5


def test_an_opening_prompt_past_the_window_is_an_unscored_setup_error(stub_server, tmp_path):
    stub_server.window = 50
    outcome, _, row = run_loop(stub_server, tmp_path, max_tokens=10)
    assert outcome.kind.value == "model_error" and row["scored"] == 0
    assert "--max-model-len" in outcome.error


def test_cli_run_with_an_openai_compatible_server(stub_server, tmp_path):
    save_task(write_task(), tmp_path / "tasks" / "hello-file")
    stub_server.script = [completion(None, [WRITE]), completion("done")]
    res = CliRunner().invoke(cli_main, [
        "run", str(tmp_path / "tasks"), "--agent", "tool-loop", "--model", "openai:stub",
        "--base-url", stub_server.base_url, "--db", str(tmp_path / "cli.db"), "--json", "--run-id", "cli"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{"):])
    assert summary["total"]["passed"] == 1 and summary["failure_kinds"] == {"ok": 1}


def test_cli_explains_an_unknown_model_backend(tmp_path):
    save_task(write_task(), tmp_path / "tasks" / "hello-file")
    res = CliRunner().invoke(cli_main, ["run", str(tmp_path / "tasks"), "--agent", "tool-loop", "--model", "nope:x",
                                        "--db", str(tmp_path / "cli.db")])
    assert res.exit_code == 2 and "no model named 'nope'" in res.output and "openai" in res.output


def test_cli_explains_an_unknown_sandbox_in_plain_words(tmp_path):
    save_task(write_task(), tmp_path / "tasks" / "hello-file")
    res = CliRunner().invoke(cli_main, ["run", str(tmp_path / "tasks"), "--sandbox", "dokker",
                                        "--db", str(tmp_path / "cli.db")])
    assert res.exit_code == 2 and "no sandbox named 'dokker' (available: bwrap, docker, local" in res.output


def test_a_listed_name_that_is_not_utf8_reaches_the_model_as_a_replacement_character(stub_server, tmp_path):
    """`ls` of a file named with a byte that is not UTF-8 gave a tool result no request could encode: the
    next model turn raised, and a model that did nothing wrong ended agent_error with 0."""
    make = {"name": "exec", "arguments": {"command": "printf x > \"$(printf 'n\\377m')\""}}
    stub_server.script = [completion(None, [make]), completion(None, [{"name": "ls", "arguments": {}}]),
                          completion(None, [WRITE]), completion(None, [{"name": "finish", "arguments": {"summary": "ok"}}])]
    outcome, _, _ = run_loop(stub_server, tmp_path)
    assert (outcome.kind.value, outcome.passed) == ("ok", True), outcome.error
    listing = stub_server.requests[2]["messages"][-1]
    assert listing["role"] == "tool" and "n\ufffdm" in listing["content"]
