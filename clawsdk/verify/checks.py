"""The native declarative verifier: file, text, regex, JSON, CSV and command checks."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from clawsdk import rematch
from clawsdk.errors import FileTooLarge, PathEscapeError, VerifierError, VerifierTimeout
from clawsdk.store.events import SandboxExec, VerifierScore
from clawsdk.tasks.model import Count, Number
from clawsdk.tasks.paths import normalize_relative
from clawsdk.verify.untouched import untouched_copy
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext, read_score

if TYPE_CHECKING:
    from clawsdk.sandbox.base import ExecResult
    from clawsdk.tasks.model import Task


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str | None = None
    weight: Number = Field(1.0, ge=0)
    #: the name of a check before this one: this one scores only once that one passes ("the inputs are
    #: unchanged" is worth something beside a deliverable, and nothing to an agent that did nothing)
    only_with: str | None = None
    if TYPE_CHECKING:  # each kind's own Literal field: not one of the base's, which pydantic would require
        type: str

    def label(self) -> str:
        return self.name or f"{self.type}:{getattr(self, 'path', None) or getattr(self, 'run', '')}"[:120]

    @field_validator("path", check_fields=False)
    @classmethod
    def _in_workspace(cls, path: str) -> str:
        """A file in the workspace: one outside (/etc/passwd, ../x) cannot be read there, and scored every
        agent 0 without a word. Kept as written, since it names the check."""
        if normalize_relative(path) == ".":
            raise ValueError(f"path {path!r} names the workspace itself, not a file in it")
        return path


class _Expected(_Check):
    expected_file: str | None = None

    @field_validator("expected_file")
    @classmethod
    def _in_hidden(cls, path: str | None) -> str | None:
        if path is None:
            return None
        try:
            return normalize_relative(path)
        except PathEscapeError:
            raise ValueError(f"{path!r} must name a file among the task's hidden files (a relative path "
                             "inside hidden/)") from None

    def _need_one(self, field: str) -> None:
        if (getattr(self, field) is None) == (self.expected_file is None):
            raise ValueError(f"give exactly one of '{field}' or 'expected_file'")


class FileExists(_Check):
    type: Literal["file_exists"]
    path: str


class FileAbsent(_Check):
    type: Literal["file_absent"]
    path: str


class TextContains(_Check):
    type: Literal["text_contains"]
    path: str
    text: str | None = None
    texts: list[str] | None = None
    ignore_case: bool = False

    @model_validator(mode="after")
    def _some(self) -> TextContains:
        if not self.text and not self.texts:
            raise ValueError("give 'text' or 'texts'")
        return self


class TextEquals(_Expected):
    type: Literal["text_equals"]
    path: str
    text: str | None = None
    strip: bool = True

    @model_validator(mode="after")
    def _one(self) -> TextEquals:
        self._need_one("text")
        return self


class Regex(_Check):
    type: Literal["regex"]
    path: str
    pattern: str
    count: Count = Field(1, ge=1)
    flags: str = ""

    _compiled: re.Pattern = PrivateAttr()

    @model_validator(mode="after")
    def _compiles(self) -> Regex:
        if set(self.flags) - set("ims"):
            raise ValueError("flags may contain only i, m, s")
        flags = sum({"i": re.I, "m": re.M, "s": re.S}[f] for f in set(self.flags))
        # compiled now, so a bad pattern is a load error naming the check, never a failed rollout
        try:
            self._compiled = re.compile(self.pattern, flags)
        except (re.error, RecursionError, OverflowError) as e:
            raise ValueError(f"pattern {self.pattern[:80]!r} is not a valid regular expression: {e}") from None
        return self


class JsonEquals(_Expected):
    type: Literal["json_equals"]
    path: str
    expected: Any = None
    subset: bool = False
    ignore_order: bool = False
    tolerance: Number = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> JsonEquals:
        if ("expected" in self.model_fields_set) == (self.expected_file is not None):
            raise ValueError("give exactly one of 'expected' or 'expected_file'")
        return self


class CsvEquals(_Expected):
    type: Literal["csv_equals"]
    path: str
    expected: list[list[Any]] | None = None
    ignore_row_order: bool = False
    tolerance: Number = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> CsvEquals:
        self._need_one("expected")
        return self


class Command(_Check):
    type: Literal["command"]
    run: str
    #: runs the agent's code before the hidden files exist; its stdout is `run`'s stdin
    agent_run: str | None = None
    expect_exit: Count = 0
    score_from_stdout: bool = False
    timeout_s: Number | None = Field(None, gt=0)


Check = Annotated[
    FileExists | FileAbsent | TextContains | TextEquals | Regex | JsonEquals | CsvEquals | Command,
    Field(discriminator="type"),
]
_checks = TypeAdapter(list[Check])


def parse_checks(raw: list[dict[str, Any]]) -> list[Any]:
    """Typed checks, or ValueError naming the check and field at fault."""
    if not raw:
        raise ValueError("verifier.checks is empty: a task needs at least one check")
    try:
        checks = _checks.validate_python(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = list(err["loc"])
        if not loc:
            raise ValueError(f"verifier.checks: {err['msg']}") from None
        where = f"verifier.checks[{loc[0]}]" + "".join(f".{p}" for p in loc[2:] if isinstance(p, str))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if msg.startswith("pattern "):
            where += ".pattern"
        raise ValueError(f"{where}: {msg}") from None
    for i, c in enumerate(checks):
        before = [b.label() for b in checks[:i]]
        if c.only_with is not None and c.only_with not in before:
            raise ValueError(f"verifier.checks[{i}].only_with: {c.only_with!r} names no check before this one "
                             f"({', '.join(repr(n) for n in before) or 'there is none'})")
    return checks


# ---- comparison helpers -------------------------------------------------------------------


def _num(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        try:
            return float(x)
        except OverflowError:  # an int past a float (400 digits): compared exactly, as itself
            return None
    if isinstance(x, str):
        try:
            return float(x.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def values_equal(a: Any, b: Any, tolerance: float = 0.0, ignore_order: bool = False, subset: bool = False) -> bool:
    """Structural equality with numeric tolerance; `subset`: every key of b is in a and equal."""
    if isinstance(b, dict):
        if not isinstance(a, dict):
            return False
        if not subset and set(a) != set(b):
            return False
        return all(k in a and values_equal(a[k], v, tolerance, ignore_order, subset) for k, v in b.items())
    if isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            return False
        if not ignore_order:
            return all(values_equal(x, y, tolerance, ignore_order, subset) for x, y in zip(a, b, strict=True))
        remaining = list(a)
        for y in b:
            for i, x in enumerate(remaining):
                if values_equal(x, y, tolerance, ignore_order, subset):
                    del remaining[i]
                    break
            else:
                return False
        return True
    na, nb = _num(a), _num(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and na is not None and nb is not None:
        return math.isclose(na, nb, abs_tol=tolerance, rel_tol=0) or na == nb
    return a == b


def _cells_equal(a: str, b: Any, tolerance: float) -> bool:
    na, nb = _num(a), _num(b)
    if na is not None and nb is not None:
        return abs(na - nb) <= tolerance + 1e-12
    return str(a).strip() == str(b).strip()


#: a regex check matches in a process of its own (clawsdk.rematch), stopped past this
REGEX_TIMEOUT_S = 20.0
#: what a check leaves of the verifier's time, to record its verdict
CHECK_MARGIN_S = 2.0


class ChecksVerifier(Verifier):
    """Runs each check; the verdict is their weighted mean, kept check by check."""

    name = "checks"

    def __init__(self, spec: Any):
        self.spec = spec
        self.checks = parse_checks(spec.checks)
        self.pass_threshold = spec.pass_threshold
        self._agent_runs: dict[int, tuple[ExecResult, float]] | None = None  # check -> its agent_run, limit

    async def before_hidden(self, ctx: VerifyContext) -> bool:
        self._agent_runs = {}
        for i, c in enumerate(self.checks):
            if c.type == "command" and c.agent_run:
                limit = c.timeout_s or ctx.task.limits.verifier_timeout_s
                if ctx.deadline is not None:  # the agent's code that hangs scores its check 0, never unscored
                    limit = min(limit, max(0.1, (ctx.deadline - anyio.current_time()) / 2))
                self._agent_runs[i] = await self._exec(c.agent_run, ctx, limit, stage="agent_run"), limit
        return bool(self._agent_runs)

    async def verify(self, ctx: VerifyContext) -> Verdict:
        if self._agent_runs is None:
            if ctx.hidden_path is not None and any(c.type == "command" and c.agent_run for c in self.checks):
                raise VerifierError(f"task {ctx.task.id}: the hidden files were injected before the checks' "
                                    "agent_run commands ran; call the verifier's before_hidden() first")
            await self.before_hidden(ctx)
        subscores = []
        scores: dict[str, float] = {}
        for i, check in enumerate(self.checks):
            try:
                score, detail = await self._run(check, ctx, i)
            except PathEscapeError as e:  # the agent's symlink out of the workspace: no deliverable, scored
                score, detail = 0.0, str(e)
            if check.only_with is not None and score > 0 and scores[check.only_with] < 1:
                score, detail = 0.0, f"counts only once {check.only_with!r} passes ({detail})"
            scores[check.label()] = score
            sub = SubScore(name=check.label(), score=score, weight=check.weight, detail=detail[:2000])
            subscores.append(sub)
            await ctx.recorder.record(VerifierScore(check=sub.name, score=score, detail=sub.detail))
        return Verdict.aggregate(self.name, subscores, self.pass_threshold)

    def check_task(self, task: Task) -> None:
        """ValueError naming the check whose expected file the task does not hold, or holds in a form it
        cannot read: every rollout of it would be a verifier_error."""
        hidden = {f.path: f for f in task.hidden}
        for i, c in enumerate(self.checks):
            if getattr(c, "expected_file", None) is None:
                continue
            where = f"verifier.checks[{i}].expected_file"
            f = hidden.get(c.expected_file)
            if f is None:
                have = ", ".join(sorted(hidden)[:5]) or "none"
                raise ValueError(f"{where}: {c.expected_file!r} is not among the task's hidden files ({have})")
            try:
                text = f.data.decode("utf-8")
                if c.type == "json_equals":
                    json.loads(text)
            except (ValueError, RecursionError) as e:  # not UTF-8, not JSON
                raise ValueError(f"{where}: hidden file {c.expected_file!r} cannot be read as "
                                 f"{'JSON' if c.type == 'json_equals' else 'UTF-8 text'}: {str(e)[:200]}") from None

    def _hidden(self, ctx: VerifyContext, path: str) -> bytes:
        for f in ctx.task.hidden:
            if f.path == path:
                return f.data
        raise VerifierError(f"task {ctx.task.id}: expected_file {path!r} is not among its hidden files")

    async def _text(self, ctx: VerifyContext, path: str) -> str | None:
        try:
            return (await ctx.sandbox.read_capped(path)).decode("utf-8", "replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    async def _exec(self, command: str, ctx: VerifyContext, limit: float, *, stage: str,
                    stdin: bytes | None = None) -> ExecResult:
        result = await ctx.sandbox.exec(command, timeout=limit, stdin=stdin)
        await ctx.recorder.record(SandboxExec.of(command, result, stage=stage))
        return result

    @staticmethod
    def _time_left(ctx: VerifyContext) -> float:
        """What is left of the verifier's time, less a margin to record the verdict."""
        if ctx.deadline is None:
            return math.inf
        margin = min(CHECK_MARGIN_S, ctx.task.limits.verifier_timeout_s / 10)
        return ctx.deadline - anyio.current_time() - margin

    async def _slow_untouched(self, c: Any, ctx: VerifyContext) -> bool:
        """Whether the command also runs past the verifier's time on the task's untouched files: then the
        slowness is the check's own. The copy goes beside the hidden files, whose folders the agent cannot
        write: in the workspace, a tool that looks for its configuration in the folders above (pytest's
        conftest.py, git's .git/config) would find the agent's and hang there too, unscored."""
        where = await untouched_copy(ctx, ctx.task.workspace)
        if where is None:  # the agent filled its disk: its files are what failed
            return False
        left = self._time_left(ctx)
        command = f"cd -- {shlex.quote(where)} && {c.run}"
        return left <= 0 or (await self._exec(command, ctx, left, stage="run on the untouched task")).timed_out

    async def _run(self, c: Any, ctx: VerifyContext, index: int) -> tuple[float, str]:
        if c.type == "command":
            limit = c.timeout_s or ctx.task.limits.verifier_timeout_s
            # at most half the verifier's time left, so that a timeout can be judged on the untouched task
            cut = limit > (half := self._time_left(ctx) / 2)
            limit = max(0.1, min(limit, half))
            stdin = None
            if c.agent_run:
                assert self._agent_runs is not None  # verify() ran before_hidden
                answers, agent_limit = self._agent_runs[index]
                if answers.timed_out:
                    return 0.0, f"agent_run did not finish in {agent_limit:.1f} s"
                stdin = answers.stdout.encode("utf-8", "surrogateescape")
            result = await self._exec(c.run, ctx, limit, stage="run", stdin=stdin)
            tail = (result.stdout.strip().splitlines() or [""])[-1]
            if result.timed_out and cut and not c.agent_run and await self._slow_untouched(c, ctx):
                raise VerifierTimeout(f"check {c.label()!r} did not finish within the verifier's time, on the "
                                      f"task's untouched files too; raise limits.verifier_timeout_s")
            if result.timed_out:
                # its own timeout, or the verifier's time on what the agent left (an endless VIEW in its
                # database): the agent's 0, never unscored
                return 0.0, f"timed out after {limit:.3g} s"
            if c.score_from_stdout:
                if result.exit_code != c.expect_exit:
                    return 0.0, f"exit {result.exit_code}: {result.stderr.strip()[-500:]}"
                value = read_score(tail)
                if value is None:
                    return 0.0, f"last stdout line is not a score: {tail[:200]!r}"
                if not 0 <= value <= 1:
                    return 0.0, f"score {value} outside [0, 1]"
                return value, f"score {value}"
            ok = result.exit_code == c.expect_exit
            out = (result.stdout + result.stderr).strip()[-500:]
            return float(ok), f"exit {result.exit_code}" + (f": {out}" if out else "")

        try:
            text = await self._text(ctx, c.path)
        except FileTooLarge as e:  # it is there; its content is more than a check reads
            if c.type in ("file_exists", "file_absent"):
                return float(c.type == "file_exists"), "exists"
            return 0.0, str(e)
        if c.type == "file_absent":
            return float(text is None), "absent" if text is None else "exists"
        if text is None:
            return 0.0, f"{c.path} does not exist"
        if c.type == "file_exists":
            return 1.0, "exists"
        if c.type == "text_contains":
            wanted = c.texts or [c.text]
            hay = text.lower() if c.ignore_case else text
            found = [w for w in wanted if (w.lower() if c.ignore_case else w) in hay]
            missing = [w for w in wanted if w not in found]
            return len(found) / len(wanted), "all found" if not missing else f"missing: {missing[:5]}"
        if c.type == "text_equals":
            expected = c.text if c.text is not None else self._hidden(ctx, c.expected_file).decode()
            a, b = (text.strip(), expected.strip()) if c.strip else (text, expected)
            return float(a == b), "equal" if a == b else "differs"
        if c.type == "regex":
            # in a process of its own: the task's pattern may backtrack without end on the agent's text
            # (it held the run's event loop, every rollout, for as long as it took)
            # cut to the verifier's time left: the pattern runs on the agent's text, whose slowness is its own
            limit = max(0.0, min(REGEX_TIMEOUT_S, self._time_left(ctx)))
            with anyio.move_on_after(limit):
                n = await rematch.in_process("count_matches", c._compiled.pattern, c._compiled.flags, text)
                return float(n >= c.count), f"{n} match(es), need {c.count}"
            return 0.0, f"the pattern was still matching {c.path} after {limit:.3g} s and was stopped"
        if c.type == "json_equals":
            expected = c.expected if c.expected_file is None else json.loads(self._hidden(ctx, c.expected_file))
            try:
                actual = json.loads(text)
                ok = values_equal(actual, expected, c.tolerance, c.ignore_order, c.subset)
            except (ValueError, RecursionError, ArithmeticError) as e:  # not JSON, too deep, a 5,000-digit number
                return 0.0, f"{c.path} is not JSON this check can read: {type(e).__name__}: {str(e)[:200]}"
            return float(ok), "equal" if ok else f"differs: got {' '.join(text[:600].split())[:300]}"
        if c.type == "csv_equals":
            try:
                rows = [r for r in csv.reader(io.StringIO(text)) if r]
            except csv.Error as e:  # a field over csv's limit, a newline in an unquoted field
                return 0.0, f"{c.path} is not CSV this check can read: {e}"
            if c.expected_file is not None:
                raw = self._hidden(ctx, c.expected_file).decode()
                expected = [r for r in csv.reader(io.StringIO(raw)) if r]
            else:
                expected = c.expected
            if len(rows) != len(expected):
                return 0.0, f"{len(rows)} rows, expected {len(expected)}"

            def row_eq(a: list, b: list) -> bool:
                return len(a) == len(b) and all(_cells_equal(x, y, c.tolerance) for x, y in zip(a, b, strict=True))

            if c.ignore_row_order and rows:
                header_ok = row_eq(rows[0], expected[0])
                body, want = rows[1:], list(expected[1:])
                for r in body:
                    match = next((i for i, w in enumerate(want) if row_eq(r, w)), None)
                    if match is None:
                        return 0.0, f"unexpected row {r}"
                    del want[match]
                return float(header_ok), "equal" if header_ok else f"header differs: {rows[0]}"
            for i, (row, expected_row) in enumerate(zip(rows, expected, strict=True)):
                if not row_eq(row, expected_row):
                    return 0.0, f"row {i + 1} differs: {row} != {expected_row}"
            return 1.0, "equal"
        raise VerifierError(f"unknown check type {c.type!r}")
