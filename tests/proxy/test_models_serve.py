"""`clawsdk models serve embedded`: the embedded model as a local OpenAI-compatible server, answered by the plain
`openai` client library (chat completions, streaming, the Responses API), token-protected on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("gguf")
    from clawsdk_plugins.models.embedded import embedded_gguf

    try:
        embedded_gguf()
    except Exception as e:  # the weights' package is not installed
        pytest.skip(str(e))
    proc = subprocess.Popen([sys.executable, "-m", "clawsdk", "models", "serve", "embedded", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        yield info
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_openai_client_gets_an_answer_with_token_ids(served):
    import openai

    assert served["base_url"].startswith("http://127.0.0.1:")  # loopback
    client = openai.OpenAI(base_url=served["base_url"], api_key=served["token"])
    assert [m.id for m in client.models.list().data] == [served["model"]]
    answer = client.chat.completions.create(model=served["model"], max_tokens=8,
                                            messages=[{"role": "user", "content": "Say hi."}])
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    # token ids and logprobs where vLLM puts them, for clients that train on them
    extra = answer.model_extra or {}
    assert extra.get("prompt_token_ids") and (choice.model_extra or {}).get("token_ids")
    assert answer.usage.completion_tokens == len(choice.model_extra["token_ids"])


def test_streaming_and_the_responses_api_are_served_too(served):
    import openai

    client = openai.OpenAI(base_url=served["base_url"], api_key=served["token"])
    chunks = list(client.chat.completions.create(model=served["model"], max_tokens=8, stream=True,
                                                 messages=[{"role": "user", "content": "Say hi."}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and any(c.choices and c.choices[0].finish_reason for c in chunks)
    response = client.responses.create(model=served["model"], input="Say hi.", max_output_tokens=8)
    assert response.status in ("completed", "incomplete") and response.output_text


def test_a_client_without_the_token_is_refused(served):
    import openai

    client = openai.OpenAI(base_url=served["base_url"], api_key="not-the-token")
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model=served["model"], max_tokens=4,
                                       messages=[{"role": "user", "content": "hi"}])
