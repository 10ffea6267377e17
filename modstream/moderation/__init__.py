"""The moderation step's pure core, keyed by (content_id, content_version): admission of one
input, the step and its state, and one module per contract rule under rules/ (the table in
docs/architecture.md, "Contract rules"). No PyFlink import. Layer: with `review` and `scanning`."""
