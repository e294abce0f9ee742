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
