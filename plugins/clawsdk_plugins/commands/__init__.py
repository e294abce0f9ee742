"""CLI commands that are plugins: serve, proxy, models, skills, bench, synth."""
