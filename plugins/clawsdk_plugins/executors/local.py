"""Built-in executors."""

from clawsdk.hookspecs import hookimpl
from clawsdk.runtime.executor import LocalExecutor


@hookimpl
def register_executors(register):
    register("local", LocalExecutor)
