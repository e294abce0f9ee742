"""Built-in verifiers."""

from clawsdk.hookspecs import hookimpl
from clawsdk.verify.checks import ChecksVerifier


@hookimpl
def register_verifiers(register):
    register("checks", ChecksVerifier)
    from clawsdk.verify.hybrid import hybrid_verifier
    from clawsdk.verify.rubric import rubric_verifier

    register("rubric", rubric_verifier)
    register("hybrid", hybrid_verifier)
