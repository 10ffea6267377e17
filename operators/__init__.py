"""Pure decision logic: plain Python over the contract's models, no PyFlink import."""
