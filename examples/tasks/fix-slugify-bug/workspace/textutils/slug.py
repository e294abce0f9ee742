"""URL slugs for blog post titles."""
import re
import unicodedata


def slugify(title, max_length=50):
    """Turn a title into a URL slug.

    The slug is lower-case ASCII letters and digits, with words joined by single
    hyphens and no leading or trailing hyphen. Accents are stripped
    ("Crème brûlée" -> "creme-brulee") and any run of other characters counts as one
    separator. If the slug is longer than max_length, whole words are dropped from the
    end until it fits; if even the first word is longer than max_length, that word is
    cut to max_length characters.
    """
    text = unicodedata.normalize("NFKD", title)
    text = text.encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"[^a-z0-9]", "-", text)
    text = text.strip("-")
    if len(text) > max_length:
        text = text[:max_length]
    return text
