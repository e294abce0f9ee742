"""Fixtures that tests/data's modules share with the modules that define them (an `as` import re-exports)."""

from tests.data.test_data_select_export import store_path as store_path
from tests.openclaw.test_openclaw_agent import openclaw_home as openclaw_home
