"""The store: one SQLite file (sqlite-utils), its append-only migrations and the batching writer.

sqlite-utils imports pandas and numpy at import time when they are installed (the training
extras pull them in), only to map their column types; clawsdk never inserts pandas or numpy
values, and the two cost about half a second of every command's start-up. So sqlite-utils is
imported here, before any store module uses it, with the two hidden unless they are loaded
already; pandas and numpy import normally afterwards.
"""

from __future__ import annotations

import sys

_hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
for _name in _hidden:
    sys.modules[_name] = None  # type: ignore[assignment]  # makes `import pandas` raise ImportError
try:
    import sqlite_utils  # noqa: F401 - imported for its side effect, with the two hidden (above)
finally:
    for _name in _hidden:
        if sys.modules.get(_name) is None:
            del sys.modules[_name]
