"""clawsdk's first-party plugins, one folder per kind: sources, sandboxes, agents, models, trainers,
executors, verifiers, skills, commands."""
