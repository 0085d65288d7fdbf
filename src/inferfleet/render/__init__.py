"""Render every artifact of a fleet: units, env files, monitoring, client configs."""
