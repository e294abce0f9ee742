"""Systems & automation: renaming files by a rule, summarizing logs, converting configs."""

from __future__ import annotations

import datetime as dt
import shlex
from collections import Counter

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, dump_json, exec_, json_check, ls, read, write


class RenameByRule(Family):
    name = "rename-by-rule"
    category = "systems & automation"
    subcategory = "file management"
    summary = "rename camera files to a date-based naming rule"

    def build(self, rng, level):
        n = (4, 8, 12)[level - 1] + rng.randint(0, 3)
        folder = rng.choice(("photos", "camera", "dcim", "uploads", "phone"))
        sep = rng.choice(("_", "-"))
        stamps: set[dt.datetime] = set()
        base = dt.datetime(rng.randint(2018, 2024), rng.randint(1, 12), rng.randint(1, 28), 8)
        while len(stamps) < n:
            stamps.add(base + dt.timedelta(minutes=rng.randint(0, 60 * 24 * 30), seconds=rng.randint(0, 59)))
        files, renames, keep = {}, [], []
        for i, t in enumerate(sorted(stamps)):
            kind = "VID" if level >= 2 and rng.random() < 0.3 else "IMG"
            ext = "mp4" if kind == "VID" else "jpg"
            shown_ext = ext.upper() if level == 3 and rng.random() < 0.4 else ext
            old = f"{folder}/{kind}_{t:%Y%m%d}_{t:%H%M%S}.{shown_ext}"
            new = f"{folder}/{t:%Y-%m-%d}{sep}{t:%H%M%S}.{ext}"
            files[old] = f"{kind.lower()} {i} {rng.choice(pools.WORDS)} {rng.randint(1000, 9999)}\n"
            renames.append((old, new))
        if level == 3:
            for name in (f"{folder}/IMG_edited_{rng.randint(1, 99)}.jpg", f"{folder}/notes.txt",
                         f"{folder}/VID_{rng.randint(1000, 9999)}.mov"):
                files[name] = f"keep me {rng.randint(0, 10 ** 6)}\n"
                keep.append(name)
        kinds = "IMG_YYYYMMDD_HHMMSS.jpg" + (" and VID_YYYYMMDD_HHMMSS.mp4" if level >= 2 else "")
        instruction = f"""
The files in {folder}/ come straight off my phone, named like {kinds}.
Rename each of them in place to YYYY-MM-DD{sep}HHMMSS.<ext> using the date and time from
its name, keeping the extension{" in lower case" if level == 3 else ""} (e.g. IMG_20230412_153201.jpg becomes
2023-04-12{sep}153201.jpg). Keep the files' contents as they are.
"""
        if level == 3:
            instruction += "Leave any file that does not follow that camera pattern exactly as it is.\n"
        checks = []
        for old, new in renames:
            checks.append({"type": "text_equals", "name": f"{new} has the content of {old}", "path": new,
                           "text": files[old], "strip": False})
            checks.append({"type": "file_absent", "path": old})
        for name in keep:
            checks.append({"type": "text_equals", "name": f"{name} untouched", "path": name, "text": files[name],
                           "strip": False})
        command = " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in renames)
        solution = [ls(folder), exec_(command), ls(folder)]
        return Spec(instruction, files, checks, solution, tags=["files", "rename", "shell"])


LEVEL_WORDS = ("INFO", "WARN", "ERROR", "DEBUG")
COMPONENTS = ("api", "db", "worker", "auth", "cache", "scheduler", "mailer", "billing")


class LogSummary(Family):
    name = "log-summary"
    category = "systems & automation"
    subcategory = "logs & monitoring"
    summary = "summarize an application log into counts"

    def build(self, rng, level):
        n = (20, 60, 120)[level - 1] + rng.randint(0, 20)
        comps = rng.sample(COMPONENTS, k=3 + level)
        weights = [rng.randint(1, 10) for _ in LEVEL_WORDS]
        t = dt.datetime(2024, rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 20), rng.randint(0, 59))
        lines, levels, by_comp, errors = [], Counter(), Counter(), Counter()
        for _ in range(n):
            t += dt.timedelta(seconds=rng.randint(1, 90))
            lvl = rng.choices(LEVEL_WORDS, weights)[0]
            comp = rng.choice(comps)
            msg = f"{rng.choice(pools.VERBS)} {rng.choice(pools.TOPICS)} id={rng.randint(1, 9999)}"
            lines.append(f"{t:%Y-%m-%dT%H:%M:%SZ} {lvl} [{comp}] {msg}")
            levels[lvl] += 1
            by_comp[comp] += 1
            if lvl == "ERROR":
                errors[comp] += 1
                if level == 3 and rng.random() < 0.5:
                    lines.append("    Traceback (most recent call last):")
                    lines.append(f'      File "{comp}.py", line {rng.randint(10, 400)}, in run')
        log_name = rng.choice(("app.log", "service.log", "server.log", "logs/app.log"))
        expected = {"total": n, "by_level": dict(sorted(levels.items()))}
        fields = '"total" (number of entries) and "by_level" (entries per level)'
        if level >= 2:
            expected["by_component"] = dict(sorted(by_comp.items()))
            expected["errors_by_component"] = dict(sorted(errors.items()))
            fields += (', "by_component" (entries per component, the name in square brackets) and '
                       '"errors_by_component" (ERROR entries per component; leave out components with none)')
        instruction = f"""
Please summarize {log_name}. Each entry is one line: a timestamp, a level (INFO, WARN, ERROR or
DEBUG), a [component] and a message. Write summary.json with {fields}. Leave levels that never
occur out of the counts.
"""
        if level == 3:
            instruction += "Indented lines are stack-trace continuations of the entry above, not entries.\n"
        solution = [read(log_name), write("summary.json", dump_json(expected))]
        return Spec(instruction, {log_name: "\n".join(lines) + "\n"}, json_check("summary.json", "expected.json"),
                    solution, hidden={"expected.json": dump_json(expected)}, tags=["logs", "json"])


class ConfigConvert(Family):
    name = "config-convert"
    category = "systems & automation"
    subcategory = "configuration"
    summary = "convert an INI config to typed JSON"

    def _value(self, rng, level):
        kind = rng.choice(("int", "float", "bool", "str", "str") + (("list",) if level == 3 else ()))
        if kind == "int":
            v = rng.randint(0, 65535)
            return str(v), v
        if kind == "float":
            v = round(rng.uniform(0, 100), rng.randint(1, 3))
            return repr(v), v
        if kind == "bool":
            word = rng.choice(("true", "false", "yes", "no", "on", "off") if level >= 2 else ("true", "false"))
            return word, word in ("true", "yes", "on")
        if kind == "list":
            items = [rng.choice(pools.WORDS) for _ in range(rng.randint(2, 4))]
            return ", ".join(items), items
        v = rng.choice((f"{rng.choice(pools.WORDS)}.{rng.choice(pools.DOMAINS)}", f"/var/lib/{rng.choice(pools.WORDS)}",
                        rng.choice(pools.WORDS), f"{rng.choice(pools.COMPANIES)} {rng.choice(pools.TOPICS)}"))
        return v, v

    def build(self, rng, level):
        sections = rng.sample(pools.TOPICS, k=(2, 3, 5)[level - 1])
        lines, expected = [], {}
        if level >= 2:
            lines += [f"# {rng.choice(pools.COMPANIES)} {rng.choice(pools.TOPICS)} service settings", ""]
        for sec in sections:
            lines.append(f"[{sec}]")
            expected[sec] = {}
            for key in rng.sample(("host", "port", "timeout", "retries", "enabled", "path", "mode", "workers",
                                   "ratio", "debug", "name", "level", "limit", "region", "tags"),
                                  k=rng.randint(2, 3 + level)):
                raw, val = self._value(rng, level)
                if isinstance(val, list):
                    key = "tags"
                if key in expected[sec]:
                    continue
                if level >= 2 and rng.random() < 0.2:
                    lines.append(rng.choice(("; tuned in the last incident", "# keep in sync with ops")))
                sep = rng.choice((" = ", "=")) if level >= 2 else " = "
                lines.append(f"{key}{sep}{raw}")
                expected[sec][key] = val
            lines.append("")
        name = rng.choice(("settings.ini", "service.ini", "config/app.ini", "app.cfg"))
        rules = ["integers become JSON numbers, decimals become numbers, true/false become booleans,",
                 "everything else stays a string"]
        if level >= 2:
            rules[0] = "integers and decimals become JSON numbers; true/yes/on and false/no/off become booleans;"
            rules.append("; lines starting with # or ; are comments")
        if level == 3:
            rules.append('; the "tags" key holds a comma-separated list that becomes a JSON array of strings')
        instruction = f"""
Convert {name} to JSON: write config.json with one object per [section] holding its keys.
Value types: {" ".join(rules)}. Keep keys and strings exactly as written (trimmed).
"""
        solution = [read(name), write("config.json", dump_json(expected))]
        return Spec(instruction, {name: "\n".join(lines)}, json_check("config.json", "expected.json"), solution,
                    hidden={"expected.json": dump_json(expected)}, tags=["config", "ini", "json"])


FAMILIES = (RenameByRule(), LogSummary(), ConfigConvert())
