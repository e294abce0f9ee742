"""Content & domain: subtitle timing, bibliographies."""

from __future__ import annotations

from clawsdk.synth.families import pools
from clawsdk.synth.families.base import Family, Spec, read, write


def srt_time(ms: int) -> str:
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, milli = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{milli:03d}"


LINES = ("Where were you last night?", "We have to leave before dawn.", "I told you, the map is wrong.",
         "Keep your voice down.", "Do you hear that?", "It's only the wind.", "Then why is the door open?",
         "Nobody has lived here for years.", "Look at the footprints.", "They're fresh.", "Run!",
         "I can't see anything.", "Hold my hand.", "The lantern is out of oil.", "Listen... the river.",
         "We follow it north.", "What if they find us?", "They won't. Not tonight.", "Promise me.",
         "I promise.", "Is that smoke?", "Someone's cooking.", "Stay behind me.", "Hello? Anyone there?")


class SrtShift(Family):
    name = "srt-shift"
    category = "content & domain"
    subcategory = "media"
    summary = "shift subtitle timings by an offset"

    def build(self, rng, level, template="default"):
        n = (6, 12, 20)[level - 1] + rng.randint(0, 4)
        offset = rng.choice((-1, 1)) * rng.randint(1, 40) * (100 if level == 1 else rng.choice((1, 10, 100)))
        t = rng.randint(5_000, 60_000) + abs(offset)
        cues = []
        for i in range(n):
            dur = rng.randint(900, 4000)
            text = rng.choice(LINES)
            if level >= 2 and rng.random() < 0.3:
                text += "\n" + rng.choice(LINES)
            cues.append((i + 1, t, t + dur, text))
            t += dur + rng.randint(100, 3000)
        start_at = rng.randint(2, n // 2) if level == 3 else 1

        def render(shift: bool) -> str:
            blocks = []
            for idx, a, b, text in cues:
                d = offset if shift and idx >= start_at else 0
                blocks.append(f"{idx}\n{srt_time(a + d)} --> {srt_time(b + d)}\n{text}\n")
            return "\n".join(blocks)

        name = f"{rng.choice(pools.WORDS)}_{rng.choice(('s01e01', 'part1', 'final', 'v2'))}.srt"
        later = "later" if offset > 0 else "earlier"
        amount = f"{abs(offset) / 1000:g} seconds"
        scope = "every subtitle" if start_at == 1 else f"subtitle number {start_at} and every one after it"
        instruction = f"""
The subtitles in {name} are out of sync with the video: {scope} should appear {amount} {later}.
Fix the timings in {name} itself (both the start and the end time of those cues) and leave the
cue numbers, the text and everything else exactly as it is.
"""
        expected = render(True)
        checks = [{"type": "text_equals", "name": f"{name} retimed", "path": name, "expected_file": "expected.srt"}]
        solution = [read(name), write(name, expected)]
        return Spec(instruction, {name: render(False)}, checks, solution, hidden={"expected.srt": expected},
                    tags=["subtitles", "time"])


TITLES = ("Learning to {v} at scale", "On the {a} of {n}", "A {a} approach to {n}", "{N} revisited",
          "Towards {a} {n}", "Why {n} matters", "Measuring {n} in practice", "The {a} {n} problem")
ADJ = ("robust", "sparse", "incremental", "adaptive", "scalable", "private", "causal", "efficient")
NOUN = ("retrieval", "scheduling", "compression", "caching", "routing", "consensus", "indexing", "planning")
VENUES = ("Journal of Applied Systems", "Proceedings of the Workshop on Data", "Review of Computing",
          "Transactions on Knowledge", "Annals of Information Work", "Letters in Automation")


class BibliographyFormat(Family):
    name = "bibliography-format"
    category = "content & domain"
    subcategory = "writing & citation"
    summary = "format references from JSON into a sorted bibliography"

    def build(self, rng, level, template="default"):
        n = (3, 6, 10)[level - 1] + rng.randint(0, 2)
        refs = []
        seen = set()
        while len(refs) < n:
            authors = [f"{rng.choice(pools.LAST)}, {rng.choice(pools.FIRST)}"
                       for _ in range(rng.randint(1, 2 if level == 1 else 5))]
            title = rng.choice(TITLES).format(v=rng.choice(pools.VERBS), a=rng.choice(ADJ), n=rng.choice(NOUN),
                                             N=rng.choice(NOUN).capitalize())
            key = (authors[0], title)
            if key in seen:
                continue
            seen.add(key)
            ref = {"authors": authors, "year": rng.randint(1995, 2024), "title": title,
                   "venue": rng.choice(VENUES)}
            if level >= 2 and rng.random() < 0.6:
                first = rng.randint(1, 400)
                ref["pages"] = f"{first}-{first + rng.randint(3, 30)}"
            refs.append(ref)

        def names(authors: list[str]) -> str:
            short = []
            for a in authors:
                last, first = a.split(", ")
                short.append(f"{last}, {first[0]}.")
            if level == 3 and len(short) > 3:
                return f"{short[0]} et al."
            if len(short) == 1:
                return short[0]
            return ", ".join(short[:-1]) + " & " + short[-1]

        def entry(r: dict) -> str:
            s = f"- {names(r['authors'])} ({r['year']}). {r['title']}. *{r['venue']}*"
            if "pages" in r:
                s += f", {r['pages']}"
            return s + "."

        ordered = sorted(refs, key=lambda r: (r["authors"][0].split(", ")[0], r["year"], r["title"]))
        expected = "# References\n\n" + "\n".join(entry(r) for r in ordered) + "\n"
        import json

        workspace = {"references.json": json.dumps(refs, indent=2) + "\n"}
        instruction = """
Turn references.json into references.md: a line "# References", a blank line, then one line
per reference in this exact form:

  - Last, F. (Year). Title. *Venue*.

Authors are written "Last, F." (surname, comma, first initial and a dot); two or more authors
are joined with ", " except the last, which is joined with " & ". Sort the references by the
first author's surname, then year, then title.
"""
        if level >= 2:
            instruction += "When a reference has pages, put them after the venue: *Venue*, 12-34.\n"
        if level == 3:
            instruction += "With more than three authors write only the first one followed by \" et al.\".\n"
        checks = [{"type": "text_equals", "name": "references.md formatted", "path": "references.md",
                   "expected_file": "expected.md"}]
        solution = [read("references.json"), write("references.md", expected)]
        return Spec(instruction, workspace, checks, solution, hidden={"expected.md": expected},
                    tags=["citations", "markdown"])


FAMILIES = (SrtShift(), BibliographyFormat())
