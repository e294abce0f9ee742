import unittest

from textutils import slugify


class SlugifyTest(unittest.TestCase):
    def test_simple_title(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_accents_are_stripped(self):
        self.assertEqual(slugify("Crème brûlée for beginners"), "creme-brulee-for-beginners")

    def test_punctuation_runs_become_one_hyphen(self):
        self.assertEqual(slugify("Hello,  World!"), "hello-world")
        self.assertEqual(slugify("Q&A: what's new in 3.12?"), "q-a-what-s-new-in-3-12")

    def test_long_titles_are_cut_at_a_word_boundary(self):
        title = "Ten things I learned from running a bakery for ten years"
        self.assertEqual(slugify(title, max_length=30), "ten-things-i-learned-from")

    def test_single_long_word_is_cut(self):
        self.assertEqual(slugify("Supercalifragilisticexpialidocious", max_length=10), "supercalif")


if __name__ == "__main__":
    unittest.main()
