"""Command line interface (typer): one module per verb group."""
