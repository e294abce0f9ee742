"""Systems & automation: renaming files by a rule, summarizing logs, converting configs."""

from __future__ import annotations

import datetime as dt
import shlex
from collections import Counter
from pathlib import PurePosixPath

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, dump_json, exec_, json_check, ls, read, write

# source naming pattern -> target rules; a template is one (source, rule) pair
RENAME_RULES = {
    "camera": ("date-time", "compact-seq", "year-month", "prefix-seq"),
    "titled": ("date-slug", "slug-compact", "year-folder"),
    "numbered": ("pad-slug", "slug-pad", "slug-folder"),
}
EXTS = {"camera": ("jpg", "mp4"), "titled": ("pdf", "docx", "txt"), "numbered": ("png", "pdf", "tif")}


class RenameByRule(Family):
    name = "rename-by-rule"
    category = "systems & automation"
    subcategory = "file management"
    summary = "rename files by a rule built from fields of their names (date, time, title slug, number, extension)"

    def templates(self, level):
        return tuple(f"{src}:{rule}" for src, rules in RENAME_RULES.items() for rule in rules)

    def _items(self, rng, source, level, n):
        """n (old name without folder, fields) for the source naming pattern."""
        items, seen = [], set()
        base = dt.datetime(rng.randint(2018, 2024), rng.randint(1, 12), rng.randint(1, 28), 8)
        titles = [[rng.choice(pools.WORDS), rng.choice(pools.TOPICS)] + ([rng.choice(pools.WORDS)] if rng.random() < .4
                                                                         else []) for _ in range(2 + level)]
        while len(items) < n:
            t = base + dt.timedelta(minutes=rng.randint(0, 60 * 24 * (3 if source == "camera" else 400)),
                                    seconds=rng.randint(0, 59))
            words = rng.choice(titles) if source == "numbered" else rng.choice(titles) + [rng.choice(pools.PRODUCTS)]
            ext = EXTS[source][0] if level == 1 else rng.choice(EXTS[source])
            kind = "VID" if ext == "mp4" else "IMG"
            number = rng.randint(1, 40)
            title = " ".join(w.capitalize() for w in words)
            old = {"camera": f"{kind}_{t:%Y%m%d}_{t:%H%M%S}", "titled": f"{title} {t:%Y-%m-%d}",
                   "numbered": f"{title} ({number})"}[source]
            key = old.lower() if source != "titled" else (title.lower(), f"{t:%Y}")
            if key in seen:
                continue
            seen.add(key)
            shown = ext.upper() if level == 3 and rng.random() < 0.4 else ext
            items.append((f"{old}.{shown}", {"t": t, "ext": ext, "slug": "-".join(w.lower() for w in words),
                                             "n": number, "kind": kind}))
        return items

    def build(self, rng, level, template="default"):
        source, rule = template.split(":")
        n = (4, 7, 10)[level - 1] + rng.randint(0, 3)
        folder = rng.choice({"camera": ("photos", "camera", "dcim", "phone"), "titled": ("docs", "inbox", "papers"),
                             "numbered": ("scans", "exports", "pages")}[source])
        sep = rng.choice(("_", "-", "."))
        width = rng.choice((2, 3, 4))
        prefix = rng.choice(pools.WORDS)
        items = self._items(rng, source, level, n)
        order = sorted(range(n), key=lambda i: items[i][1]["t"])
        seq: dict[int, int] = {}
        per_day: dict[str, int] = {}
        for i in order:
            day = f"{items[i][1]['t']:%Y%m%d}"
            per_day[day] = per_day.get(day, 0) + 1
            seq[i] = per_day[day] if rule == "compact-seq" else len(seq) + 1

        def target(i: int) -> str:
            f = items[i][1]
            t, ext, slug, num = f["t"], f["ext"], f["slug"], f"{f['n']:0{width}d}"
            return {
                "date-time": f"{t:%Y-%m-%d}{sep}{t:%H%M%S}.{ext}",
                "compact-seq": f"{t:%Y%m%d}{sep}{seq[i]:0{width}d}.{ext}",
                "year-month": f"{t:%Y}/{t:%m}/{t:%Y-%m-%d}{sep}{t:%H%M%S}.{ext}",
                "prefix-seq": f"{prefix}{sep}{seq[i]:0{width}d}.{ext}",
                "date-slug": f"{t:%Y-%m-%d}{sep}{slug}.{ext}",
                "slug-compact": f"{slug}{sep}{t:%Y%m%d}.{ext}",
                "year-folder": f"{t:%Y}/{slug}.{ext}",
                "pad-slug": f"{num}{sep}{slug}.{ext}",
                "slug-pad": f"{slug}{sep}{num}.{ext}",
                "slug-folder": f"{slug}/{num}.{ext}",
            }[rule]

        pad = f"zero-padded to {width} digits"
        rules = {
            "date-time": f"YYYY-MM-DD{sep}HHMMSS.<ext>, the date and time the name holds",
            "compact-seq": f"YYYYMMDD{sep}<k>.<ext>, where k numbers the files of each day from 1 in order "
                           f"of their time ({pad})",
            "year-month": f"YYYY/MM/YYYY-MM-DD{sep}HHMMSS.<ext>, moved into a folder per year and month inside "
                          f"{folder}/",
            "prefix-seq": f"{prefix}{sep}<k>.<ext>, where k numbers all the files from 1 in order of the date "
                          f"and time in their names ({pad})",
            "date-slug": f"YYYY-MM-DD{sep}<slug>.<ext>",
            "slug-compact": f"<slug>{sep}YYYYMMDD.<ext>",
            "year-folder": f"YYYY/<slug>.<ext>, moved into a folder per year inside {folder}/",
            "pad-slug": f"<number>{sep}<slug>.<ext>, the number {pad}",
            "slug-pad": f"<slug>{sep}<number>.<ext>, the number {pad}",
            "slug-folder": f"<slug>/<number>.<ext>, one folder per title inside {folder}/, the number {pad}",
        }
        pattern = {"camera": "IMG_YYYYMMDD_HHMMSS.<ext> (or VID_... for videos)",
                   "titled": "<Title Words> YYYY-MM-DD.<ext>",
                   "numbered": "<Title Words> (<number>).<ext>"}[source]
        files, renames, keep = {}, [], []
        for i, (old, _) in enumerate(items):
            files[f"{folder}/{old}"] = f"{items[i][1]['kind'].lower()} {i} {rng.choice(pools.WORDS)} " \
                                       f"{rng.randint(1000, 9999)}\n"
            renames.append((f"{folder}/{old}", f"{folder}/{target(i)}"))
        if level == 3:
            for name in (f"{folder}/{rng.choice(pools.WORDS)}_edited_{rng.randint(1, 99)}.jpg", f"{folder}/notes.txt",
                         f"{folder}/{rng.choice(pools.WORDS).upper()}-{rng.randint(1000, 9999)}.mov"):
                files[name] = f"keep me {rng.randint(0, 10 ** 6)}\n"
                keep.append(name)
        instruction = f"""
The files in {folder}/ are named like {pattern}. Rename each of them to
{rules[rule]}. <slug> is the title in lower case with its words joined by "-"; <ext> is the
extension{" in lower case" if level == 3 else ""}. Keep the files' contents as they are.
"""
        if level == 3:
            instruction += "Leave any file that does not follow that naming pattern exactly as it is.\n"
        # an old name being gone, or a look-alike left alone, counts only beside a file renamed right:
        # deleting every file, or doing nothing, earns nothing
        checks = []
        for old, new in renames:
            moved = f"{new} has the content of {old}"
            checks.append({"type": "text_equals", "name": moved, "path": new, "text": files[old], "strip": False})
            checks.append({"type": "file_absent", "path": old, "only_with": moved})
        for name in keep:
            checks.append({"type": "text_equals", "name": f"{name} untouched", "path": name, "text": files[name],
                           "strip": False, "only_with": checks[0]["name"]})
        dirs = sorted({str(PurePosixPath(new).parent) for _, new in renames} - {folder})
        steps = ([f"mkdir -p {' '.join(shlex.quote(d) for d in dirs)}"] if dirs else []) + \
            [f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in renames]
        solution = [ls(folder), exec_(" && ".join(steps)), ls(folder, recursive=bool(dirs))]
        return Spec(instruction, files, checks, solution, tags=["files", "rename", "shell"], template=template)


LEVEL_WORDS = ("INFO", "WARN", "ERROR", "DEBUG")
COMPONENTS = ("api", "db", "worker", "auth", "cache", "scheduler", "mailer", "billing")


class LogSummary(Family):
    name = "log-summary"
    category = "systems & automation"
    subcategory = "logs & monitoring"
    summary = "summarize an application log into counts"

    def build(self, rng, level, template="default"):
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

    def build(self, rng, level, template="default"):
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
