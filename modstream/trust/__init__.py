"""What every authority record is checked with: signatures, keyrings (keys bound to roles), hash
banks, the two-person rule on policies (docs/SECURITY.md). Layer: over `contract`."""
