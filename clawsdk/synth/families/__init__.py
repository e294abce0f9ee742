"""Procedural task families: verifiable workspace tasks with reference solutions, no model needed."""

from __future__ import annotations

from clawsdk.synth.families import analysis, content, planning, productivity, reports, software, systems
from clawsdk.synth.families.base import LEVEL_NAMES, LEVELS, Family, Spec

FAMILIES: dict[str, Family] = {
    f.name: f
    for module in (productivity, systems, analysis, reports, content, planning, software)
    for f in module.FAMILIES
}


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise LookupError(f"no procedural family {name!r} (families: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[name]


def resolve_families(spec: str | list[str]) -> list[Family]:
    """'all', a comma-separated list of family names, or category names (every family of it)."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[Family] = []
    for raw in (n.strip() for n in names):
        if not raw:
            continue
        if raw == "all":
            picked = list(FAMILIES.values())
        elif raw in FAMILIES:
            picked = [FAMILIES[raw]]
        else:
            picked = [f for f in FAMILIES.values() if f.category == raw]
            if not picked:
                raise LookupError(f"no procedural family or category {raw!r} "
                                  f"(families: {', '.join(sorted(FAMILIES))}; or 'all')")
        out += [f for f in picked if f not in out]
    if not out:
        raise LookupError("no families given (use --families all)")
    return out


__all__ = ["FAMILIES", "Family", "LEVELS", "LEVEL_NAMES", "Spec", "get_family", "resolve_families"]
