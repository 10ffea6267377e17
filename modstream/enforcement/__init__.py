"""Enforcement's pure core: applying an action exactly once in effect (intents), reconciliation
of what users see, account sanctions, and the reference Content Service (docs/enforcement.md).
Layer: over `trust`; beside `policy` and `detectors`."""
