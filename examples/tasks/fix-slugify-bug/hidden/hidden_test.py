"""Extra slugify cases the workspace tests don't cover. Standard library only."""
import os
import sys
import unittest

sys.path.insert(0, os.environ.get("CLAWSDK_WORKSPACE", os.getcwd()))

from textutils import slugify  # noqa: E402


class HiddenSlugifyTest(unittest.TestCase):
    def test_empty_and_symbol_only(self):
        self.assertEqual(slugify(""), "")
        self.assertEqual(slugify("!!! ???"), "")

    def test_leading_and_trailing_separators(self):
        self.assertEqual(slugify("  --Rust vs. Go--  "), "rust-vs-go")

    def test_exact_fit_keeps_last_word(self):
        # "alpha-beta-gamma" is exactly 16 characters
        self.assertEqual(slugify("Alpha beta gamma", max_length=16), "alpha-beta-gamma")
        self.assertEqual(slugify("Alpha beta gamma", max_length=15), "alpha-beta")

    def test_cut_never_ends_with_hyphen(self):
        for n in range(1, 40):
            s = slugify("Why our CI takes 45 minutes - and how we fixed it", max_length=n)
            self.assertLessEqual(len(s), n)
            self.assertFalse(s.endswith("-") or s.startswith("-"), (n, s))
            self.assertNotIn("--", s)

    def test_default_max_length(self):
        s = slugify("word " * 20)
        self.assertEqual(s, "-".join(["word"] * 10))

    def test_unicode_punctuation(self):
        self.assertEqual(slugify("“Smart” quotes — and dashes…"), "smart-quotes-and-dashes")
        self.assertEqual(slugify("Ångström units, 5 Å"), "angstrom-units-5-a")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    sys.exit(0 if result.wasSuccessful() else 1)
