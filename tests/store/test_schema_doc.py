from clawsdk.store.schema import schema_markdown
from tests.conftest import REPO


def test_schema_doc_matches_the_migrations():
    doc = (REPO / "docs" / "schema.md").read_text()
    assert doc == schema_markdown(), "docs/schema.md is stale: run python -m clawsdk.store.schema > docs/schema.md"
