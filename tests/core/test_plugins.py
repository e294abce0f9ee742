import subprocess
import sys
import textwrap

from clawsdk.plugins import Registry


def _write_plugin_dist(site, name, module_source):
    """A minimal installed distribution with a `clawsdk` entry point, on a path we add to sys.path."""
    (site / f"{name}.py").write_text(textwrap.dedent(module_source))
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[clawsdk]\n{name} = {name}\n")


def _plugins_json(site, env_extra=None):
    import json
    import os

    env = dict(os.environ, PYTHONPATH=str(site), **(env_extra or {}))
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
    assert plugins["clawsdk_plugins.agents"]["origin"] == "builtin"


def test_allow_list_limits_entry_point_plugins(tmp_path):
    _write_plugin_dist(tmp_path, "claw_one", "x = 1\n")
    _write_plugin_dist(tmp_path, "claw_two", "x = 2\n")
    plugins = _plugins_json(tmp_path, {"CLAWSDK_PLUGINS": "claw_two"})
    assert "claw_two" in plugins and "claw_one" not in plugins
    assert "clawsdk_plugins.sources" in plugins  # built-ins always load


def test_builtins_register_through_the_hooks():
    r = Registry()
    r.load_builtins()
    assert {"oracle", "scripted"} <= set(r.names("agents"))
    assert "local" in r.names("sandboxes") and "core" in r.names("skills")
    assert "checks" in r.names("verifiers") and "native" in r.names("task_sources")
    assert all(p.error is None for p in r.plugins), [p for p in r.plugins if p.error]
