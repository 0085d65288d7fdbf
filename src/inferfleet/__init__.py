"""inferfleet: fleet-as-code for self-hosted LLM inference."""

from __future__ import annotations

__version__ = "0.1.0"
