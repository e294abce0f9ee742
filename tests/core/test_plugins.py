import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawsdk.errors import PluginError
from clawsdk.hookspecs import hookimpl
from clawsdk.plugins import Registry


def _write_plugin_dist(site, name, module_source):
    """A minimal installed distribution with a `clawsdk` entry point, on a path we add to sys.path."""
    (site / f"{name}.py").write_text(textwrap.dedent(module_source))
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[clawsdk]\n{name} = {name}\n")


def _env(site, **extra):
    """The plugin's site first, then the caller's path (a checkout's code over an editable install's)."""
    import os

    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def _plugins_json(site, env_extra=None):

    env = _env(site, **(env_extra or {}))
    out = subprocess.run([sys.executable, "-c", "from clawsdk.cli import main; main()", "plugins", "--json"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return {p["name"]: p for p in json.loads(out.stdout)}


def test_third_party_plugins_load_and_broken_ones_are_reported_not_fatal(tmp_path):
    _write_plugin_dist(tmp_path, "claw_good", """
        from clawsdk.hookspecs import hookimpl
        from clawsdk.runtime.oracle import OracleAgent

        @hookimpl
        def register_agents(register):
            register("good-agent", OracleAgent)
    """)
    _write_plugin_dist(tmp_path, "claw_broken", "raise ImportError('missing dependency xyz')\n")
    _write_plugin_dist(tmp_path, "claw_badhook", """
        from clawsdk.hookspecs import hookimpl

        @hookimpl
        def register_sandboxes(register):
            raise RuntimeError('hook exploded')
    """)
    plugins = _plugins_json(tmp_path)
    assert plugins["claw_good"]["provides"] == {"agents": ["good-agent"]}
    assert plugins["claw_good"]["origin"].startswith("entry point claw_good")
    assert "missing dependency xyz" in plugins["claw_broken"]["error"]
    assert "hook exploded" in plugins["claw_badhook"]["error"]
    assert plugins["clawsdk_plugins.agents.builtin"]["origin"] == "builtin"


def test_allow_list_limits_entry_point_plugins(tmp_path):
    _write_plugin_dist(tmp_path, "claw_one", "x = 1\n")
    _write_plugin_dist(tmp_path, "claw_two", "x = 2\n")
    plugins = _plugins_json(tmp_path, {"CLAWSDK_PLUGINS": "claw_two"})
    assert "claw_two" in plugins and "claw_one" not in plugins
    assert "clawsdk_plugins.sources.native" in plugins  # built-ins always load


def test_builtins_register_through_the_hooks():
    r = Registry()
    r.load_builtins()
    assert {"oracle", "scripted"} <= set(r.names("agents"))
    assert "local" in r.names("sandboxes") and "core" in r.names("skills")
    assert "checks" in r.names("verifiers") and "native" in r.names("task_sources")
    assert all(p.error is None for p in r.plugins), [p for p in r.plugins if p.error]


# ---- names, ordering, wrappers: the registry calls the hooks through pluggy ----------------------


def _sandbox_plugin(name, factory, **register_kw):
    class Plugin:
        @hookimpl
        def register_sandboxes(self, register):
            register(name, factory, **register_kw)

    return Plugin()


def test_a_name_taken_is_refused_naming_both_plugins():
    r = Registry()
    r.load_builtins()
    builtin_local = r.get("sandboxes", "local")
    info = r.add_plugin(_sandbox_plugin("local", lambda config=None: None), "claw_clash")
    assert r.get("sandboxes", "local") is builtin_local
    assert r.owner("sandboxes", "local") == "clawsdk_plugins.sandboxes.local"
    assert info.notes == ["refused sandbox 'local': plugin clawsdk_plugins.sandboxes.local registered it first "
                          "(register it with replace=True to take it over)"]
    assert "sandboxes" not in info.provides


def test_replace_true_takes_a_name_over_and_both_reports_say_so():
    r = Registry()
    r.load_builtins()

    def mine(config=None):
        return None

    info = r.add_plugin(_sandbox_plugin("local", mine, replace=True), "claw_override")
    assert r.get("sandboxes", "local") is mine and r.owner("sandboxes", "local") == "claw_override"
    assert info.notes == ["replaced sandbox 'local' of plugin clawsdk_plugins.sandboxes.local"]
    builtin = next(p for p in r.plugins if p.name == "clawsdk_plugins.sandboxes.local")
    assert "local" not in builtin.provides["sandboxes"]
    assert builtin.notes == ["sandbox 'local' replaced by plugin claw_override"]


def test_first_in_load_order_wins_whatever_order_pluggy_calls_in():
    first, second = (lambda config=None: "first"), (lambda config=None: "second")
    r = Registry()
    infos = r.load((_sandbox_plugin("same", first), "claw_a"), (_sandbox_plugin("same", second), "claw_b"))
    assert r.get("sandboxes", "same") is first  # pluggy calls claw_b first (last registered, first called)
    assert infos[1].notes[0].startswith("refused sandbox 'same': plugin claw_a registered it first")


def test_tryfirst_trylast_and_wrappers_apply():
    calls = []

    class Late:
        @hookimpl(trylast=True)
        def register_agents(self, register):
            calls.append("late")

    class Early:
        @hookimpl(tryfirst=True)
        def register_agents(self, register):
            calls.append("early")

    class Wrapper:
        @hookimpl(wrapper=True)
        def register_agents(self, register):
            calls.append("wrapper in")
            result = yield
            calls.append("wrapper out")
            return result

    Registry().load((Late(), "late"), (Early(), "early"), (Wrapper(), "wrapper"))
    assert calls == ["wrapper in", "early", "late", "wrapper out"]


def test_a_failing_hook_is_reported_on_its_plugin_and_the_others_register():
    class Broken:
        @hookimpl(tryfirst=True)  # called before the good one: it must not stop the call
        def register_sandboxes(self, register):
            raise RuntimeError("exploded")

    good = _sandbox_plugin("good", lambda config=None: None)
    r = Registry()
    broken_info, good_info = r.load((Broken(), "claw_broken"), (good, "claw_good"))
    assert broken_info.error == "register_sandboxes failed: RuntimeError: exploded"
    assert r.owner("sandboxes", "good") == "claw_good" and good_info.error is None


def test_unknown_name_error_uses_the_singular_kind():
    r = Registry()
    r.load_builtins()
    with pytest.raises(PluginError, match=r"^no sandbox named 'nope' \(available: bwrap, docker, local\)$"):
        r.get("sandboxes", "nope")
    with pytest.raises(PluginError, match=r"^no task source named 'nope'"):
        r.get("task_sources", "nope")


def test_a_plugin_command_named_like_a_core_command_is_reported(tmp_path):
    _write_plugin_dist(tmp_path, "claw_cmd", """
        import click
        from clawsdk.hookspecs import hookimpl

        @click.command("runs")
        def runs():
            '''Not the store's runs.'''

        @click.command("hello")
        def hello():
            '''Say hello.'''
            click.echo("hello from a plugin")

        @hookimpl
        def register_commands(register):
            register(runs)
            register(hello)
    """)

    env = _env(tmp_path)
    out = subprocess.run([sys.executable, "-m", "clawsdk", "hello"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "hello from a plugin"
    assert "warning: plugin claw_cmd: refused command 'runs': clawsdk has its own command of that name" in out.stderr
    plugins = _plugins_json(tmp_path)
    assert plugins["claw_cmd"]["provides"] == {"commands": ["hello"]}


def test_builtin_kinds_say_what_each_builtin_registers():
    """BUILTIN_KINDS lets a command import only the plugins of the kinds it uses; it must be exact."""
    import importlib

    from clawsdk.plugins import BUILTIN_KINDS, DEFAULT_PLUGINS

    assert set(BUILTIN_KINDS) == set(DEFAULT_PLUGINS)
    for modname in DEFAULT_PLUGINS:
        r = Registry()
        (info,) = r.load((importlib.import_module(modname), modname), origin="builtin")
        assert info.error is None, info.error
        assert set(info.provides) == set(BUILTIN_KINDS[modname]), modname


def test_a_kind_loads_only_its_plugins():
    code = (
        "import sys\n"
        "from clawsdk.plugins import get_registry\n"
        "r = get_registry()\n"
        "assert 'native' in r.names('task_sources')\n"
        "print(sorted(m for m in sys.modules if m.startswith('clawsdk_plugins.') or m in ('mcp', 'torch')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout))
    assert {"clawsdk_plugins.sources.native", "clawsdk_plugins.sources.clawgym",
            "clawsdk_plugins.sources.procedural"} <= loaded
    assert not loaded & {"mcp", "clawsdk_plugins.models.openai", "clawsdk_plugins.agents.toolloop",
                         "clawsdk_plugins.sandboxes.docker", "clawsdk_plugins.trainers.trl",
                         "clawsdk_plugins.commands.synth"}


def test_a_plugin_that_exits_or_interrupts_on_import_is_reported_not_fatal(tmp_path):
    """sys.exit() in a plugin's import ended every command that loads plugins, silently."""

    _write_plugin_dist(tmp_path, "claw_exits", "import sys\nsys.exit(3)\n")
    _write_plugin_dist(tmp_path, "claw_interrupts", "raise KeyboardInterrupt\n")
    _write_plugin_dist(tmp_path, "claw_hook_exits", """
        import sys
        from clawsdk.hookspecs import hookimpl

        @hookimpl
        def register_agents(register):
            sys.exit('bye from a hook')
    """)
    plugins = _plugins_json(tmp_path)
    assert plugins["claw_exits"]["error"] == "SystemExit: 3"
    assert plugins["claw_interrupts"]["error"] == "KeyboardInterrupt"
    assert plugins["claw_hook_exits"]["error"] == "register_agents failed: SystemExit: bye from a hook"
    assert "oracle" in plugins["clawsdk_plugins.agents.builtin"]["provides"]["agents"]
    env = _env(tmp_path)
    out = subprocess.run([sys.executable, "-m", "clawsdk", "tasks", "list", "examples/tasks"],
                         capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and "monthly-expense-report" in out.stdout, out.stderr
    assert "plugin claw_exits failed to load: SystemExit: 3" in out.stderr, out.stderr


def test_a_task_source_whose_detect_raises_is_not_mine_with_a_warning(tmp_path):
    """Its detect() raising made every bare path fail to load, native tasks included."""

    _write_plugin_dist(tmp_path, "claw_detect", """
        from clawsdk.hookspecs import hookimpl

        class Source:
            def detect(self, path):
                raise RuntimeError('detect exploded')

            def load(self, path):
                raise RuntimeError('load exploded')

        @hookimpl
        def register_task_sources(register):
            register('aaa-first', Source())  # detected before every built-in source
    """)
    env = _env(tmp_path)
    out = subprocess.run([sys.executable, "-m", "clawsdk", "tasks", "list", "examples/tasks"],
                         capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and "monthly-expense-report" in out.stdout, out.stderr
    warning = "task source 'aaa-first' of plugin claw_detect: detect() raised RuntimeError: detect exploded"
    assert warning in " ".join(out.stderr.split()), out.stderr


