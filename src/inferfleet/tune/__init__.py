"""`inferfleet tune`: the fleet finds its own best settings, measured, as a reviewed change."""
