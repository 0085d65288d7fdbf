"""Runtime adapters (spec -> argv as data) and runtime installs."""
