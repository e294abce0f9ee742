"""The Textual operator view; imported only by the `clawsdk watch` command.

from clawsdk_tui.app import WatchApp
WatchApp("path/to/clawsdk.db").run()
"""
