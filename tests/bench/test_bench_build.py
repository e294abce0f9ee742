"""The build filters on synthetic pass rates: band, quotas, decontamination, flakiness, the manifest."""

from __future__ import annotations

import json

import pytest

from clawsdk.bench.build import BuildOptions, select
from clawsdk.bench.decontam import jaccard, read_training, shingles
from clawsdk.bench.manifest import ManifestError, load_manifest, parse_manifest
from clawsdk.tasks.model import Task

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def task(i: int, category: str = "analysis & reasoning", instruction: str | None = None) -> Task:
    # distinct instructions: each task gets its own run of words, so none is a near-duplicate of another
    words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] + str(i) for j in range(12))
    return Task(id=f"t{i:02d}", category=category, instruction=instruction or f"Summarise the {words} files.",
                verifier={"checks": [{"type": "file_exists", "path": f"out{i}.txt"}]})


def rates(pairs: list[tuple[Task, list[float]]], n: int = 10) -> dict:
    """Measurements: each list entry is one run's pass rate over n samples."""
    return {t.hash: {f"run{j}": (n, round(p * n)) for j, p in enumerate(ps)} for t, ps in pairs}


def opts(**kw) -> BuildOptions:
    kw.setdefault("name", "synthetic")
    kw.setdefault("version", "1")
    return BuildOptions(**kw)


def reasons(result) -> dict[str, str]:
    return {d.id: d.reason for d in result.dropped}


def test_band_keeps_the_tasks_that_discriminate():
    ts = [task(i) for i in range(6)]
    m = rates([(ts[0], [0.0]), (ts[1], [0.1]), (ts[2], [0.5]), (ts[3], [0.9]), (ts[4], [1.0]), (ts[5], [1.0, 0.2])])
    r = select(ts, opts(band=(0.1, 0.9)), measurements=m)
    assert sorted(t.id for t in r.manifest.tasks) == ["t01", "t02", "t03", "t05"]  # t05: mean of 1.0 and 0.2
    assert reasons(r) == {"t00": "too_hard", "t04": "too_easy"}
    kept = {t.id: t.pass_rate for t in r.manifest.tasks}
    assert kept["t05"] == pytest.approx(0.6)


def test_unmeasured_tasks_and_min_samples_and_spread():
    ts = [task(i) for i in range(4)]
    m = rates([(ts[0], [0.5, 0.5]), (ts[1], [0.2, 0.8])], n=4)
    m[ts[2].hash] = {"run0": (1, 1)}  # one sample only
    r = select(ts, opts(band=(0.0, 1.0), min_samples=2, min_spread=0.3), measurements=m)
    assert [t.id for t in r.manifest.tasks] == ["t01"]
    assert reasons(r) == {"t00": "low_spread", "t02": "unmeasured", "t03": "unmeasured"}


def test_a_band_without_measurements_is_a_clear_error():
    with pytest.raises(ManifestError, match="needs measured pass rates"):
        select([task(1)], opts())
    r = select([task(1)], opts(band=None))
    assert len(r.manifest.tasks) == 1


def test_quotas_take_the_most_discriminating_tasks_and_report_shortfalls():
    ts = ([task(i, "A") for i in range(5)] + [task(10 + i, "B") for i in range(2)]
          + [task(20 + i, "C") for i in range(3)] + [task(30, "D")])
    ps = [(t, [p]) for t, p in zip(ts[:5], [0.5, 0.2, 0.45, 0.8, 0.3], strict=True)] + [(t, [0.5]) for t in ts[5:]]
    r = select(ts, opts(band=(0.1, 0.9), quotas={"A": 2, "B": 4, "*": 1}), measurements=rates(ps))
    ids = sorted(t.id for t in r.manifest.tasks)
    assert [i for i in ids if i < "t10"] == ["t00", "t02"]  # pass rates 0.5 and 0.45: nearest to 1/2
    assert len([i for i in ids if "t10" <= i < "t20"]) == 2
    assert len([i for i in ids if "t20" <= i < "t30"]) == 1  # '*' quota
    assert "t30" in ids
    assert r.shortfalls == {"B": (4, 2)}
    why = reasons(r)
    assert why["t01"] == why["t03"] == why["t04"] == "over_quota"
    # no quota and no '*': the category is dropped
    r = select(ts, opts(band=None, quotas={"A": 1}))
    assert {t.category for t in r.manifest.tasks} == {"A"}
    assert reasons(r)["t30"] == "no_quota"


def test_total_balances_categories_round_robin():
    ts = [task(i, "A") for i in range(8)] + [task(10 + i, "B") for i in range(2)] + [task(20 + i, "C") for i in range(8)]
    r = select(ts, opts(band=None, total=9))
    cats = [t.category for t in r.manifest.tasks]
    # round robin A, B, C, A, B, C, A, C, A: B has only 2
    assert (cats.count("A"), cats.count("B"), cats.count("C")) == (4, 2, 3)
    assert sum(1 for d in r.dropped if d.reason == "over_quota") == 18 - 9


def test_category_weighting_gives_each_category_the_same_total_weight():
    ts = [task(i, "A") for i in range(6)] + [task(10 + i, "B") for i in range(2)]
    r = select(ts, opts(band=None, weighting="category"))
    w = {"A": 0.0, "B": 0.0}
    for t in r.manifest.tasks:
        w[t.category] += t.weight
    assert w["A"] == pytest.approx(w["B"]) and sum(w.values()) == pytest.approx(8)


def test_training_overlap_by_hash_and_near_duplicate_instruction(tmp_path):
    ts = [task(i) for i in range(5)]
    paraphrase = ts[1].instruction.replace("Summarise", "Please summarise").replace("files.", "files now.")
    assert 0.7 <= jaccard(shingles(paraphrase), shingles(ts[1].instruction)) < 1
    far = " ".join(ts[2].instruction.split()[:5]) + " and then something else entirely different here"
    export = tmp_path / "train.jsonl"
    export.write_text("\n".join([
        json.dumps({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": paraphrase}],
                    "metadata": {"task_hash": "f" * 64}}),
        json.dumps({"task_hash": ts[0].hash, "instruction": "unrelated words only here"}),
        json.dumps({"prompt": far}),
        json.dumps(ts[3].hash),
    ]) + "\n")
    training = read_training([export])
    assert ts[0].hash in training.hashes and ts[3].hash in training.hashes and len(training.instructions) == 3
    r = select(ts, opts(band=None), training=training)
    assert reasons(r) == {"t00": "training_hash", "t01": "training_near_duplicate", "t03": "training_hash"}
    assert [t.id for t in r.manifest.tasks] == ["t02", "t04"]  # a few shared words are not a duplicate
    assert "Jaccard" in next(d.detail for d in r.dropped if d.id == "t01")


def test_training_export_as_plain_hash_lines_and_bad_files(tmp_path):
    ts = [task(i) for i in range(3)]
    hashes = tmp_path / "hashes.txt"
    hashes.write_text(f"{ts[2].hash}\n\n")
    r = select(ts, opts(band=None), training=read_training([hashes]))
    assert reasons(r) == {"t02": "training_hash"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "ok"}\n{not json\n')
    with pytest.raises(ManifestError, match=r"bad.jsonl:2: not valid JSON"):
        read_training([bad])
    with pytest.raises(ManifestError, match="no such training export"):
        read_training([tmp_path / "missing.jsonl"])
    # a binary file or a folder: named, with what to pass instead (was a bare UnicodeDecodeError)
    binary = tmp_path / "model.safetensors"
    binary.write_bytes(b"\x00\xff\xfe binary" * 10)
    with pytest.raises(ManifestError, match=r"safetensors: not UTF-8 text .* pass a training export: JSONL"):
        read_training([binary])
    with pytest.raises(ManifestError, match=rf"{tmp_path.name}: is a folder; pass a training export"):
        read_training([tmp_path])


def test_a_training_export_with_line_separators_in_its_strings_or_deep_nesting_or_a_fifo(tmp_path):
    """A clawsdk export whose instruction held U+2028 was refused (`not valid JSON`: splitlines() cut the row
    there); a row nested 100,000 deep was `a bug in clawsdk` (RecursionError); a fifo blocked for ever."""
    import os

    ts = [task(i) for i in range(2)]
    export = tmp_path / "data.jsonl"
    export.write_text(json.dumps({"instruction": ts[1].instruction + "\u2028 and\u0085 more",
                                  "task_hash": ts[1].hash}, ensure_ascii=False) + "\n")
    r = select(ts, opts(band=None), training=read_training([export]))
    assert reasons(r) == {"t01": "training_hash"}
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"instruction": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ManifestError, match=r"deep.jsonl:1: not valid JSON \(invalid JSON: nested deeper than"):
        read_training([deep])
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError, match="not a regular file"):
        read_training([fifo])


def test_near_duplicates_within_the_pool_keep_the_more_discriminating_one():
    a = task(1)
    b = task(2, instruction=a.instruction.replace("Summarise", "Kindly summarise"))
    m = rates([(a, [0.9]), (b, [0.5])])
    r = select([a, b], opts(band=(0.0, 1.0)), measurements=m)
    assert [t.id for t in r.manifest.tasks] == ["t02"]
    assert reasons(r) == {"t01": "pool_near_duplicate"}
    r = select([a, b], opts(band=(0.0, 1.0), dedup_pool=False), measurements=m)
    assert len(r.manifest.tasks) == 2


def test_flaky_and_failed_checks_drop_tasks_with_their_reason():
    ts = [task(i) for i in range(4)]
    seen = []

    def checks(cands):
        seen.extend(c.task.id for c in cands)
        return {ts[2].hash: ("validation_failed", "the untouched workspace already passes")}

    r = select(ts, opts(band=None), flaky={ts[1].hash: "scores 1, 0"}, checks=checks)
    assert reasons(r) == {"t01": "flaky_verifier", "t02": "validation_failed"}
    assert "t01" not in seen  # the expensive checks only run on the survivors
    assert [t.id for t in r.manifest.tasks] == ["t00", "t03"]


def test_manifest_round_trips_and_refuses_newer_versions(tmp_path):
    ts = [task(i) for i in range(3)]
    r = select(ts, opts(band=None, judge_model="openai:judge-1", samples=4), sources=["native:/x"])
    path = r.manifest.save(tmp_path / "bench.json")
    back = load_manifest(path)
    assert back == r.manifest and back.hash == r.manifest.hash
    assert back.judge_model == "openai:judge-1" and back.samples == 4
    assert [t.hash for t in back.tasks] == sorted([t.hash for t in back.tasks], key=lambda h: {
        x.hash: x.id for x in ts}[h])
    raw = json.loads(path.read_text())
    raw["schema_version"] = 99
    path.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match=r"schema_version 99 is newer .* upgrade clawsdk"):
        load_manifest(path)
    raw["schema_version"] = 1
    raw["tasks"][0]["weight"] = -1
    path.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match=r"bench.json: tasks.0.weight"):
        load_manifest(path)
    with pytest.raises(ManifestError, match="a benchmark needs at least one task"):
        parse_manifest({"kind": "clawsdk-benchmark", "name": "x", "version": "1", "tasks": []})


def test_training_export_recorded_in_the_store_is_excluded(tmp_path):
    from clawsdk.bench.decontam import read_datasets
    from clawsdk.store.store import Store, now

    ts = [task(i) for i in range(4)]
    trained = task(9, instruction=ts[1].instruction.replace("Summarise", "Please summarise"))
    with Store(tmp_path / "s.db") as store:
        with store.transaction():
            store.upsert_task(ts[0])
            store.upsert_task(trained)
            store.db.execute("INSERT INTO datasets (id, name, version, kind, format_version, n_rows, content_hash, "
                             "created_at) VALUES ('sft@v1', 'sft', 1, 'sft', 1, 2, 'x', ?)", [now()])
            for row, t in enumerate([ts[0], trained]):
                store.db.execute("INSERT INTO dataset_rows (dataset_id, row, role, task_hash) "
                                 "VALUES ('sft@v1', ?, 'example', ?)", [row, t.hash])
        training = read_datasets(store, ["sft@v1"])
        with pytest.raises(ManifestError, match=r"no dataset 'nope' .*recent: sft@v1"):
            read_datasets(store, ["nope"])
    r = select(ts, opts(band=None), training=training)
    assert reasons(r) == {"t00": "training_hash", "t01": "training_near_duplicate"}


@pytest.mark.parametrize("field,value", [("weight", "1e999"), ("weight", "-1e999"), ("weight", "NaN"),
                                         ("weight", "1e308"), ("pass_rate", "1e999"), ("pass_rate", "2")])
def test_a_weight_or_pass_rate_that_is_not_a_finite_number_in_range_names_the_field(tmp_path, field, value):
    """1e999 is valid JSON (infinity): as a weight it made every score NaN, in --json output too."""
    ts = [task(i) for i in range(2)]
    path = select(ts, opts(band=None)).manifest.save(tmp_path / "bench.json")
    raw = json.loads(path.read_text())
    raw["tasks"][1][field] = "@@"
    path.write_text(json.dumps(raw).replace('"@@"', value))
    with pytest.raises(ManifestError, match=rf"bench.json: tasks.1.{field}: "):
        load_manifest(path)


def _bench_run_cli(manifest, tmp_path, capsys) -> tuple[int, str]:
    """`clawsdk bench run MANIFEST` through the entry point users run: exit code and stderr."""
    from clawsdk.cli import main

    try:
        main(["bench", "run", str(manifest), "--agent", "oracle", "--sandbox", "local",
              "--db", str(tmp_path / "s.db")])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("value", ["1" + "0" * 30, "1e30", "100001"])
def test_a_samples_count_past_the_bound_names_the_field(tmp_path, capsys, value):
    """samples: 1e30 got past validation and overflowed SQLite's INTEGER (`OverflowError ... a bug`)."""
    path = select([task(i) for i in range(2)], opts(band=None)).manifest.save(tmp_path / "bench.json")
    raw = json.loads(path.read_text())
    raw["samples"] = "@@"
    path.write_text(json.dumps(raw).replace('"@@"', value))
    with pytest.raises(ManifestError, match=r"bench.json: samples: "):
        load_manifest(path)
    code, err = _bench_run_cli(path, tmp_path, capsys)
    assert code == 2 and "bench.json: samples:" in err and "a bug" not in err, err
    raw["samples"] = 100_000
    path.write_text(json.dumps(raw))
    assert load_manifest(path).samples == 100_000


def test_a_manifest_nested_too_deep_names_the_file(tmp_path, capsys):
    """5,000 levels of JSON raised RecursionError (`a bug in clawsdk`), naming no file."""
    from clawsdk.bench.manifest import looks_like_manifest

    path = tmp_path / "deep.json"
    path.write_text('{"kind": "clawsdk-benchmark", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    assert not looks_like_manifest(path)
    with pytest.raises(ManifestError, match=r"deep.json: invalid JSON: nested deeper than \d+ levels"):
        load_manifest(path)
    code, err = _bench_run_cli(path, tmp_path, capsys)
    assert code == 2 and f"{path}: invalid JSON: nested deeper than" in err and "a bug" not in err, err


def test_a_bench_run_that_scored_nothing_exits_1_with_the_reason(tmp_path, capsys):
    """Every sample unscored (here a model that cannot load) exited 0, as if the agent had been measured."""
    from clawsdk.cli import main
    from clawsdk.tasks.native import load_task
    from tests.conftest import make_task

    ts = [load_task(make_task(tmp_path / "tasks", f"t{i}")) for i in range(2)]
    path = select(ts, opts(band=None)).manifest.save(tmp_path / "bench.json")
    try:
        main(["bench", "run", str(path), "--tasks", str(tmp_path / "tasks"), "--agent", "tool-loop",
              "--model", f"transformers:{tmp_path / 'none'}", "--sandbox", "local", "--db", str(tmp_path / "s.db"),
              "--retries", "0"])
        code = 0
    except SystemExit as e:
        code = e.code
    _out, err = capsys.readouterr()
    assert code == 1, err
    assert f"no rollout of this run was scored; the first reason: transformers:{tmp_path / 'none'}: no such folder" \
        in " ".join(err.split())


def test_a_fifo_given_as_the_manifest_is_refused_not_waited_on(tmp_path, capsys):
    """`bench run FIFO` and `bench report --manifest FIFO` blocked for ever on the read."""
    import os

    fifo = tmp_path / "bench.json"
    os.mkfifo(fifo)
    with pytest.raises(ManifestError, match=r"bench.json: not a regular file"):
        load_manifest(fifo)
    code, err = _bench_run_cli(fifo, tmp_path, capsys)
    assert code == 2 and "not a regular file" in err, err


def test_a_pool_of_one_family_keeps_its_distinct_tasks_and_drops_a_reworded_copy():
    """Pool near-duplicates were judged by instruction alone: a procedural family words its tasks alike, and
    515 of 600 distinct procedural tasks were dropped. Content decides where there is content."""
    from clawsdk.synth.families import resolve_families
    from clawsdk.synth.procedural import generate

    pool = list(generate(resolve_families(["mail-contacts"]), 30, seed=1))
    first = pool[0]
    copy = first.model_copy(update={"id": "reworded", "instruction": "Please do this for me: " + first.instruction[::-1]})
    r = select([*pool, copy], opts(band=None))
    (d,) = r.dropped  # one of the two, whichever the build's order puts second
    assert d.reason == "pool_near_duplicate" and d.id in ("reworded", first.id), d
    kept = "reworded" if d.id == first.id else first.id
    assert d.detail.startswith("the same hidden files") and d.detail.endswith(f"as task {kept!r}"), d.detail
    assert len(r.manifest.tasks) == 30
