"""Black-box tests for ini2json.py. Standard library only; run with the workspace as cwd."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HIDDEN = os.environ.get("CLAWSDK_HIDDEN", os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(os.environ.get("CLAWSDK_WORKSPACE", os.getcwd()), "ini2json.py")


def run(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, timeout=30)


class Ini2JsonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        with open(os.path.join(HIDDEN, "sample_expected.json")) as f:
            self.expected = json.load(f)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_stdout(self):
        r = run(os.path.join(HIDDEN, "sample.ini"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), self.expected)

    def test_output_file(self):
        out = os.path.join(self.tmp, "nested out.json")
        r = run(os.path.join(HIDDEN, "sample.ini"), "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(json.load(f), self.expected)

    def test_booleans_are_not_strings(self):
        r = run(os.path.join(HIDDEN, "sample.ini"))
        data = json.loads(r.stdout)
        self.assertIs(data["cache"]["enabled"], True)
        self.assertIs(data["Paths"]["flag"], False)
        self.assertIsInstance(data["cache"]["ttl_seconds"], int)

    def test_missing_file(self):
        r = run(os.path.join(self.tmp, "nope.ini"))
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.strip())

    def test_invalid_ini(self):
        bad = os.path.join(self.tmp, "bad.ini")
        with open(bad, "w") as f:
            f.write("key_before_any_section = 1\n[x]\na = 1\n")
        r = run(bad)
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.strip())


if __name__ == "__main__":
    if not os.path.isfile(TOOL):
        print("ini2json.py not found")
        sys.exit(1)
    result = unittest.main(exit=False, verbosity=1).result
    sys.exit(0 if result.wasSuccessful() else 1)
