"""The Textual operator view; imported only by the `clawsdk watch` command."""
