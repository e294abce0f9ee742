"""Models: an OpenAI-compatible HTTP backend and the in-process engines (transformers, embedded,
llama.cpp, vLLM)."""
