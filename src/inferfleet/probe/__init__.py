"""Endpoint contract probes."""
