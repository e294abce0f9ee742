"""Built-in verifiers."""

from clawsdk.hookspecs import hookimpl
from clawsdk.verify.checks import ChecksVerifier


@hookimpl
def register_verifiers(register):
    register("checks", ChecksVerifier)
