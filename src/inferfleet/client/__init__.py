"""An OpenAI-compatible endpoint as a client sees it: targets, streaming, SSE, Server-Timing."""
