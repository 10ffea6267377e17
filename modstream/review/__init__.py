"""Human review: the queue on Redis Streams, grants and leases, second review, escalation,
agreement, wait and quality (docs/REVIEW.md). Layer: with `moderation` and `scanning`."""
