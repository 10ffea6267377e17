"""The `modstream` command: parses arguments, calls the package that does the work, prints.
Layer: over everything but `testing` and `bench` (`modstream bench` is an entry point:
cli/registered.py)."""
