"""The six ClawGym-Bench categories, and a category inferred for a task that has none.

Upstream ClawGym data often leaves `metadata.category` empty, which leaves a report with no
per-category breakdown. `infer_category` applies one documented rule (docs/formats.md):

- each category has a list of keywords (below); a keyword counts once when it appears in the
  instruction as a whole word (case-insensitive), and once more when a workspace file's
  extension is one the category lists;
- the category with the most hits wins; a tie goes to the earlier category in CATEGORIES;
- with fewer than MIN_HITS hits the task stays without a category (a guess from one word is
  noise).

A loader that uses it marks the task: `provenance["category_inferred"] = {"rule": RULE, "hits": ...}`,
so an inferred category can always be told from one the data gave.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

__all__ = ["CATEGORIES", "MIN_HITS", "RULE", "fill_missing_category", "infer_category"]

RULE = "keywords-v1"
MIN_HITS = 2

#: category -> (instruction keywords, workspace file extensions)
CATEGORIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "software development": (
        ("code", "function", "bug", "test", "tests", "unit test", "refactor", "python", "script", "api",
         "implement", "compile", "repository", "repo", "class", "module", "library", "cli", "json-rpc", "debug",
         "pytest", "package"),
        (".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".cpp", ".rb", ".sh"),
    ),
    "systems & automation": (
        ("automate", "automation", "scheduler", "schedule", "cron", "log", "logs", "shell", "command", "process",
         "rename", "backup", "config", "configuration", "server", "service", "pipeline", "batch", "monitor",
         "deploy", "background", "folder", "directory", "files"),
        (".log", ".conf", ".ini", ".yaml", ".yml", ".toml", ".service"),
    ),
    "analysis & reasoning": (
        ("analyze", "analyse", "analysis", "statistics", "average", "mean", "median", "compute", "calculate",
         "total", "trend", "compare", "dataset", "csv", "sql", "query", "metrics", "reason", "evaluate",
         "anomaly", "forecast"),
        (".csv", ".tsv", ".xlsx", ".parquet", ".sqlite", ".db"),
    ),
    "content & domain": (
        ("write", "article", "essay", "summary", "summarize", "summarise", "translate", "blog", "story", "draft",
         "copy", "charter", "policy", "document", "markdown", "subtitle", "subtitles", "tone", "edit"),
        (".md", ".txt", ".docx", ".srt", ".vtt", ".html"),
    ),
    "planning & knowledge": (
        ("plan", "planning", "itinerary", "research", "knowledge", "notes", "study", "curriculum", "roadmap",
         "timeline", "recommend", "learning", "wiki", "reference", "rfc", "rfcs", "guide", "faq"),
        (".bib",),
    ),
    "productivity & collaboration": (
        ("email", "emails", "mail", "meeting", "meetings", "calendar", "contacts", "invite", "todo", "task list",
         "reminder", "team", "colleague", "slack", "agenda", "minutes", "expense", "report", "invoice"),
        (".eml", ".ics", ".vcf", ".msg"),
    ),
}

# The instruction is split once into its words (runs of letters, digits, '_' and '-': what the rule's
# whole-word boundary delimits) and the keywords are looked up in that set; only the keywords of two words
# take a search of their own. A regex search per keyword (120 of them) made listing 2,000 ClawGym tasks
# about six times dearer in CPU than before inference (benchmarks/categories.py).
_WORD = re.compile(r"[\w-]+")
_PHRASES = {k: (k.split(), re.compile(rf"(?<![\w-]){re.escape(k)}(?![\w-])", re.I))
            for words, _ in CATEGORIES.values() for k in words if not _WORD.fullmatch(k)}


def _said(instruction: str) -> set[str]:
    """The keywords the instruction has as whole words (case-insensitive)."""
    said = {w.lower() for w in set(_WORD.findall(instruction))}
    # a phrase is searched for only when each of its words is there
    said.update(k for k, (parts, rx) in _PHRASES.items() if said.issuperset(parts) and rx.search(instruction))
    return said


def infer_category(instruction: str, files: Iterable[str] = ()) -> tuple[str, dict[str, list[str]]] | None:
    """(category, {category: what matched}) by the rule above, or None when nothing reaches MIN_HITS."""
    said = _said(instruction or "")
    suffixes = {PurePosixPath(f).suffix.lower() for f in files}
    hits: dict[str, list[str]] = {}
    for cat, (words, exts) in CATEGORIES.items():
        found = [w for w in words if w in said] + sorted(s for s in suffixes if s in exts)
        if found:
            hits[cat] = found
    if not hits:
        return None
    best = max(CATEGORIES, key=lambda c: (len(hits.get(c, [])), -list(CATEGORIES).index(c)))
    if len(hits.get(best, [])) < MIN_HITS:
        return None
    return best, hits


def fill_missing_category(data: dict) -> None:
    """For a loader: give a task dict (instruction, workspace, provenance) without a category the
    inferred one, marked in provenance; leave it alone when it has one or nothing can be inferred."""
    if data.get("category"):
        return
    files = [f.path if hasattr(f, "path") else str(f.get("path", "")) for f in data.get("workspace") or []]
    found = infer_category(str(data.get("instruction") or ""), files)
    if found is None:
        return
    data["category"], hits = found
    data.setdefault("provenance", {})["category_inferred"] = {"rule": RULE, "hits": hits[found[0]]}
