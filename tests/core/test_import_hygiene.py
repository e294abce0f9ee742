import json
import subprocess
import sys

HEAVY = ("textual", "torch", "transformers", "trl", "vllm", "docker", "ray")


def test_import_clawsdk_pulls_in_no_heavy_dependency():
    code = (
        "import sys, clawsdk, clawsdk.cli\n"
        "from clawsdk.plugins import get_registry\n"
        "get_registry()\n"
        f"heavy = [m for m in sys.modules if m.split('.')[0] in {HEAVY!r}]\n"
        "print(','.join(sorted(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import clawsdk loaded: {out.stdout.strip()}"


# What the quick commands must not load: each is a noticeable slice of start-up (pydantic models,
# the MCP SDK, pandas/numpy through sqlite-utils) or a heavy extra. `--version` loads no store either
# (sqlite-utils itself brings pluggy, so `runs` may have that).
STARTUP_HEAVY = ("pydantic", "mcp", "mcp_types", "anyio", "jsonschema", "pandas", "numpy",
                 "clawsdk_plugins", "clawsdk_tools", "clawsdk_skills", "clawsdk_tui", "rich.progress", *HEAVY)
CLI_MODULES = (
    "import json, sys\n"
    "from clawsdk.cli import cli\n"
    "try:\n"
    "    cli(sys.argv[1:], prog_name='clawsdk')\n"
    "except SystemExit as e:\n"
    "    assert not e.code, e.code\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


def _modules_loaded_by(*args: str) -> tuple[str, set[str]]:
    out = subprocess.run([sys.executable, "-c", CLI_MODULES, *args], capture_output=True, text=True, check=True)
    return out.stdout, set(json.loads(out.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_version_imports_nothing_heavy():
    stdout, modules = _modules_loaded_by("--version")
    assert "0.1.0" in stdout
    assert _heavy(modules, (*STARTUP_HEAVY, "sqlite_utils", "rich", "pluggy", "clawsdk.plugins")) == []


def test_runs_imports_no_plugin_mcp_pydantic_or_pandas(tmp_path):
    from clawsdk.store.store import Store

    db = tmp_path / "s.db"
    with Store(db) as store:
        store.upsert_run("run-quick", status="finished", agent="oracle", sandbox="local", samples=1)
    stdout, modules = _modules_loaded_by("runs", "--db", str(db), "--json")
    assert "run-quick" in stdout
    assert _heavy(modules, (*STARTUP_HEAVY, "clawsdk.plugins", "clawsdk.runtime", "clawsdk.tasks")) == []


def test_plugin_commands_still_resolve_lazily():
    """A command the core lacks comes from the plugins, loaded on demand."""
    stdout, modules = _modules_loaded_by("synth", "--help")
    assert "procedural" in stdout
    assert "clawsdk_plugins.commands.synth" in modules


def test_tasks_list_loads_only_the_task_source_plugins():
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples" / "tasks"
    stdout, modules = _modules_loaded_by("tasks", "list", str(examples))
    assert " task(s)" in stdout
    assert _heavy(modules, ("mcp", "mcp_types", *HEAVY, "clawsdk.runtime.runner", "clawsdk_plugins.models.openai",
                            "clawsdk_plugins.agents.toolloop", "clawsdk_tools")) == []
