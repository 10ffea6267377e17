"""The policy language: documents, the compiler (never evals), expressions, evaluation, the
versioned store, diff and compare (docs/policy-language.md). Layer: over `trust`."""
