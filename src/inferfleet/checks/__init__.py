"""`inferfleet check`: the lessons as rules, one module per topic."""
