"""Bringing services up: locally (up/down/status) and, later, over SSH."""
