"""The review console (issue 30): a web app over the review feed for human reviewers.

Identity, permissions, evidence and decisions are checked by the server, from the same records
the moderation job checks (review.grants, review.leases; modstream/review/access.py), so a
reviewer never holds a Kafka or Redis credential and never signs anything themselves. The cores
(`accounts`, `sessions`, `permissions`, `evidence`) are pure and tested without a browser;
`service` does the I/O and `web` is the thin Starlette layer (docs/REVIEW.md).
"""
