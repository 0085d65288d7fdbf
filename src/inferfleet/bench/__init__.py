"""Honest benchmarks of OpenAI-compatible endpoints.

Real prompts salted per request (L-47, L-48), streamed with the server's own
usage counts (L-51), at least 128 generated tokens (L-49), per-stream and
aggregate rates reported apart (L-53), servers the bench starts stopped by
pid with memory checked back before the next arm (L-43, L-52).
"""
