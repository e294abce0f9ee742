"""What a conformance kit returns: one finding per check, and a summary that says what failed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str = ""


@dataclass
class Report:
    """The findings of one kit on one plugin; `assert_ok()` fails a test with the summary."""

    kind: str
    name: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]

    def add(self, check: str, ok: bool, detail: str = "") -> bool:
        self.findings.append(Finding(check, bool(ok), "" if ok else detail))
        return bool(ok)

    def summary(self) -> str:
        passed = len(self.findings) - len(self.failures)
        lines = [f"{self.kind} {self.name}: {'passes' if self.ok else 'FAILS'} ({passed}/{len(self.findings)} checks)"]
        lines += [f"  FAIL {f.check}: {f.detail}" for f in self.failures]
        return "\n".join(lines)

    def assert_ok(self) -> None:
        assert self.ok, self.summary()


def raised(fn, *args, **kwargs) -> BaseException | None:
    """The exception `fn(*args, **kwargs)` raises, or None."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # the kit judges it
        return e
    return None


__all__ = ["Finding", "Report", "raised"]
