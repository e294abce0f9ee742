"""clawsdk's first-party plugins: task sources, sandboxes, agents, verifiers."""
