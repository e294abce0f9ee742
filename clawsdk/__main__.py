"""`python -m clawsdk` is the `clawsdk` command."""

from clawsdk.cli import main

main()
