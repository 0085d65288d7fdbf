"""Backends that start, stop and inspect services: process (local), systemd, quadlet."""
