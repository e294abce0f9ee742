"""Seeds of the model routes: personas, categories with subcategories, basic operations, skills.

The built-in seeds are data files in clawsdk/synth/data/; a user's folder with any of
personas.yaml, categories.yaml, operations.yaml replaces the matching file.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clawsdk.errors import TaskFormatError
from clawsdk.tasks.model import CATEGORIES

DATA = Path(__file__).resolve().parent / "data"
SEEDS_VERSION = 1


@dataclass
class Seeds:
    personas: list[dict[str, str]]
    categories: dict[str, list[str]]
    operations: list[str]


def _load(name: str, folder: Path | None) -> tuple[Path, dict]:
    path = folder / name if folder is not None and (folder / name).exists() else DATA / name
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise TaskFormatError(str(path), f"invalid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise TaskFormatError(str(path), "must be a mapping with a version and its list")
    version = raw.get("version", 1)
    if not isinstance(version, int) or version > SEEDS_VERSION:
        raise TaskFormatError(str(path), f"version {version!r} is newer than this clawsdk reads ({SEEDS_VERSION})",
                              field="version")
    return path, raw


def load_seeds(folder: str | os.PathLike | None = None) -> Seeds:
    """The seeds, each file from `folder` when it has one, else the built-in one."""
    folder = Path(folder) if folder is not None else None
    if folder is not None and not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such seeds folder")
    path, raw = _load("personas.yaml", folder)
    personas = raw.get("personas")
    if not isinstance(personas, list) or not personas:
        raise TaskFormatError(str(path), "needs a non-empty list", field="personas")
    for i, p in enumerate(personas):
        if not isinstance(p, dict) or not p.get("name"):
            raise TaskFormatError(str(path), "each persona needs a name (and a description)", field=f"personas[{i}]")
    path, raw = _load("categories.yaml", folder)
    cats = raw.get("categories")
    if not isinstance(cats, dict) or not cats:
        raise TaskFormatError(str(path), "needs a mapping of category -> subcategories", field="categories")
    for name, subs in cats.items():
        if name not in CATEGORIES:
            raise TaskFormatError(str(path), f"unknown category {name!r}; one of: {', '.join(CATEGORIES)}",
                                  field=f"categories.{name}")
        if not isinstance(subs, list) or not all(isinstance(s, str) for s in subs) or not subs:
            raise TaskFormatError(str(path), "needs a non-empty list of subcategory names",
                                  field=f"categories.{name}")
    path, raw = _load("operations.yaml", folder)
    ops = raw.get("operations")
    if not isinstance(ops, list) or not ops or not all(isinstance(o, str) for o in ops):
        raise TaskFormatError(str(path), "needs a non-empty list of operation names", field="operations")
    return Seeds(personas=personas, categories=cats, operations=ops)


@dataclass
class Skill:
    """A skill pack: its SKILL.md (frontmatter name and description, then the body)."""

    name: str
    description: str
    body: str
    path: str
    meta: dict[str, Any] = field(default_factory=dict)


_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.S)


def read_skill(path: str | os.PathLike) -> Skill:
    path = Path(path)
    skill_md = path / "SKILL.md" if path.is_dir() else path
    try:
        text = skill_md.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{skill_md}: a skill folder needs a SKILL.md") from None
    meta: dict[str, Any] = {}
    body = text
    m = _FRONT.match(text)
    if m:
        try:
            meta = yaml.safe_load(m.group(1)) or {}
        except yaml.YAMLError as e:
            raise TaskFormatError(str(skill_md), f"invalid YAML frontmatter: {e}") from None
        body = m.group(2)
    if not isinstance(meta, dict):
        raise TaskFormatError(str(skill_md), "the frontmatter must be a mapping (name, description)")
    name = str(meta.get("name") or skill_md.parent.name)
    return Skill(name=name, description=str(meta.get("description") or ""), body=body.strip(), path=str(skill_md),
                 meta=meta)


def find_skills(paths: list[str | os.PathLike] | None = None) -> list[Skill]:
    """Skills in the given folders (a skill folder, or a folder of them); none given: every registered
    skill that has a SKILL.md (its factory's ``skill_dir``), found through the plugin registry."""
    if paths:
        roots = [Path(p) for p in paths]
    else:
        from clawsdk.plugins import get_registry
        from clawsdk.sandbox.toolruntime import SkillPlugin

        dirs = (SkillPlugin.of(f).skill_dir for f in get_registry().tables["skills"].values())
        roots = [d for d in dirs if d is not None and (d / "SKILL.md").is_file()]
    skills: dict[str, Skill] = {}
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such skill folder")
        candidates = [root] if (root / "SKILL.md").is_file() or root.is_file() else \
            sorted(p for p in root.iterdir() if (p / "SKILL.md").is_file())
        for c in candidates:
            s = read_skill(c)
            skills.setdefault(s.name, s)
    return list(skills.values())


def pick(rng: random.Random, items: list, k: int) -> list:
    return rng.sample(items, k=min(k, len(items)))
