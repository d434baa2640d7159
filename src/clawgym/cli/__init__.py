"""The typer command-line app."""
