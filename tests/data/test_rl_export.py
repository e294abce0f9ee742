"""Token-faithful capture: model calls through the recording proxy joined into a prefix tree, and `clawsdk data
export --format rl` writing the upstream's own token ids, logprobs and loss masks per turn."""

from __future__ import annotations

import json

import anyio
import httpx2
from click.testing import CliRunner

from clawsdk.cli import cli
from clawsdk.data.calltree import branches, call_tree
from clawsdk.proxy import ModelProxy, serving
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.runner import run
from clawsdk.store.events import parse_event
from clawsdk.store.store import Store
from clawsdk.tasks.model import Task
from tests.cli_agent.scripted_model import PlannedModel, message_ids, prompt_ids, tool_call

SYSTEM = {"role": "system", "content": "You are a careful agent."}
USER = {"role": "user", "content": "Write done.txt containing done."}
WRITE = tool_call(1, "write", {"path": "done.txt", "content": "done\n"})


class ThreeCalls(Agent):
    """Three calls through the proxy, as a client makes them: the second extends the first (its answer and the
    tool's result appended), the third sends the second's prompt again (a retry). It writes done.txt itself."""

    name = "three-calls"

    def __init__(self, upstream: str, protocol: str = "chat"):
        self.upstream = upstream
        self.protocol = protocol

    async def run(self, ctx: AgentContext) -> None:
        proxy = ModelProxy(self.upstream, token_ids=True)
        token = proxy.register(ctx.recorder)
        async with serving(proxy) as url, httpx2.AsyncClient(timeout=30) as http:
            async def ask(messages):
                r = await http.post(f"{url}/v1/chat/completions", headers={"authorization": f"Bearer {token}"},
                                    json={"model": "m", "messages": messages})
                assert r.status_code == 200, r.text
                return r.json()["choices"][0]["message"]

            first = await ask([SYSTEM, USER])
            await ctx.tools.call("write", {"path": "done.txt", "content": "done\n"})
            second = [SYSTEM, USER, first, {"role": "tool", "tool_call_id": "call_1", "content": "wrote done.txt"}]
            await ask(second)
            await ask(second)  # the retry


def _rollout(db):
    model = PlannedModel([WRITE], final="All done.", token_ids=True)
    task = Task(id="t", instruction=USER["content"],
                verifier={"checks": [{"type": "text_contains", "path": "done.txt", "text": "done"}]})

    async def main():
        async with serving(model) as up:
            return await run([task], agent=ThreeCalls(up + "/v1"), db=db, run_id="rl", sandbox="local", retries=0)

    (outcome,) = anyio.run(main).outcomes
    assert (outcome.kind.value, outcome.reward) == ("ok", 1.0), outcome.error
    with Store(db) as s:
        row = s.rollouts("rl")[0]
        return row, s.events(row["id"]), model


def test_a_call_that_extends_another_is_one_branch_and_a_retry_is_marked(db):
    _, events, _ = _rollout(db)
    calls = call_tree([parse_event(e) for e in events])
    assert [(c.relation, c.retried) for c in calls] == [("root", False), ("extends", True), ("retry", False)]
    first, second, third = calls
    assert second.parent == first.seq and third.retry_of == second.seq and third.parent == first.seq
    assert [[c.seq for c in chain] for chain in branches(calls)] == [[first.seq, third.seq]]


def test_the_rl_export_holds_the_upstreams_token_ids_logprobs_and_masks(db, tmp_path):
    _, events, model = _rollout(db)
    r = CliRunner().invoke(cli, ["data", "export", "--db", str(db), "--run", "rl", "--name", "tok", "--format", "rl",
                                 "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "tok-v1" / "data.jsonl").read_text().splitlines()]
    manifest = json.loads((tmp_path / "out" / "tok-v1" / "dataset.json").read_text())
    assert manifest["kind"] == "rl-tokens" and row["retokenized"] is False and row["reward"] == 1.0

    # what the upstream said, request by request: its prompt ids, its sampled ids and their logprobs
    sent = model.requests
    p1 = prompt_ids(sent[0]["messages"])
    c1 = message_ids({**WRITE, "role": "assistant"})
    p3 = prompt_ids(sent[2]["messages"])
    c3 = message_ids({"role": "assistant", "content": "All done."})
    assert row["prompt_ids"] == p1
    assert row["completion_ids"] == c1 + p3[len(p1) + len(c1):] + c3  # no re-tokenization anywhere
    gap = len(p3) - len(p1) - len(c1)  # the tool result the client added: not the model's, not trained
    assert row["completion_mask"] == [1] * len(c1) + [0] * gap + [1] * len(c3)
    assert row["completion_logprobs"][:len(c1)] == [-0.01 * (k + 1) for k in range(len(c1))]
    assert row["completion_logprobs"][len(c1):len(c1) + gap] == [0.0] * gap
    calls = [e["seq"] for e in events if e["kind"] == "model_request"]
    assert row["calls"] == [calls[0], calls[2]] and row["retries"] == [calls[1]]
    assert [(t["call"], t["end"] - t["start"]) for t in row["turns"]] == [(calls[0], len(c1)), (calls[2], len(c3))]


def test_compactions_and_side_calls_start_branches_of_their_own():
    def req(seq, messages):
        return {"seq": seq, "kind": "model_request", "payload": {"messages": messages}}

    def resp(seq, request, content):
        return {"seq": seq, "kind": "model_response",
                "payload": {"message": {"role": "assistant", "content": content}, "request": request}}

    summary = {"role": "user", "content": "Summary of the work so far: ..."}
    title = [{"role": "system", "content": "Write a title."}, USER]
    events = [req(0, [SYSTEM, USER]), resp(1, 0, "a"),
              req(2, [SYSTEM, USER, {"role": "assistant", "content": "a"}, {"role": "user", "content": "go on"}]),
              resp(3, 2, "b"), req(4, title), resp(5, 4, "Writing done.txt"),
              req(6, [SYSTEM, summary]), resp(7, 6, "c")]
    calls = call_tree([parse_event(e) for e in events])
    assert [c.relation for c in calls] == ["root", "extends", "side", "compaction"]
    assert [[c.seq for c in chain] for chain in branches(calls)] == [[0, 2], [4], [6]]
