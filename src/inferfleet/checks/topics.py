"""Importing this module registers every rule of the catalogue (one module per topic)."""

from __future__ import annotations

from inferfleet.checks import (  # noqa: F401 - imported for their @rule registrations
    arguments,
    builds,
    client_window,
    collisions,
    declared,
    environment,
    exposure,
    fit,
    fleet_secrets,
    kubernetes,
    kvcache,
    memory,
    rpc,
    speculative,
    templates,
    tensors,
    units,
    waivers,
)
