"""Task sources: the native format and the field's formats (ClawGym, PinchBench, Harbor), each reader
with the verifier its format defines."""
