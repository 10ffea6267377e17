"""Services the commands run for operators and policy authors: replay, re-evaluation, the DLQ
tools, the policy service and promotion, the workflow fingerprint. Layer: over `stack`."""
