"""The model kit passes the openai backend (against a real local HTTP server) and fails a broken one."""

from __future__ import annotations

from clawsdk_plugins.models.openai import OpenAIModel
from conftest import completion  # tests/models/conftest.py: the stub server's answers

from clawsdk.models.base import ChatResponse, Model
from clawsdk.testing import check_model


def test_model_kit_passes_the_openai_backend(stub_server):
    stub_server.script = [completion("ok"), completion(tool_calls=[{"name": "echo", "arguments": {"text": "ok"}}])]
    model = OpenAIModel("stub", base_url=stub_server.base_url)
    down = OpenAIModel("stub", base_url="http://127.0.0.1:9/v1", backoff_s=0.01, retries=0)
    check_model(model, failing=down).assert_ok()


class Sloppy(Model):
    """Answers with a bare string as content list, tool arguments that are not JSON, and lets errors through."""

    name = "sloppy"

    def __init__(self, fail: bool = False):
        self.fail = fail

    async def chat(self, messages, tools=None, **params):
        if self.fail:
            raise ConnectionError("refused")
        calls = [{"id": "c1", "function": {"name": "echo", "arguments": "text=ok"}}] if tools else None
        return ChatResponse(message={"role": "assistant", "content": ["ok"], "tool_calls": calls},
                            usage={"completion_tokens": "3"})


def test_model_kit_fails_a_sloppy_backend():
    report = check_model(Sloppy(), failing=Sloppy(fail=True))
    failed = {f.check for f in report.failures}
    assert failed == {"a plain chat: an assistant message of the contract's shape",
                      "a chat with tools offered: an assistant message of the contract's shape",
                      "a backend failure raises ModelError saying what failed"}
    assert "arguments are not a JSON object" in report.summary() and "ConnectionError" in report.summary()
