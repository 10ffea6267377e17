"""Scanning: which detector each version needs and in what cost order, the pools, admission
under overload, batch handling and score drift (docs/scanning.md). Layer: with `moderation`."""
