"""Task synthesis: procedural families (no model) and ClawGym's persona and skill routes (a model),
with execution-gated verifiers and a record of every stage in the store."""

from clawsdk.synth.families import FAMILIES, Family, get_family, resolve_families
from clawsdk.synth.procedural import SynthResult, generate, synthesize_procedural
from clawsdk.synth.records import SynthRecords

__all__ = ["FAMILIES", "Family", "SynthRecords", "SynthResult", "generate", "get_family", "resolve_families",
           "synthesize_procedural"]
