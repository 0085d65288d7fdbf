"""The health gate: HTTP status AND the service's own process on the port."""
