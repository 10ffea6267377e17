"""Analysts' tools over the decision streams: the Parquet archive and its DuckDB views, Flink SQL
tables, evaluation against labels, cost, decision quality and the HTML report (docs/ANALYSTS.md).
Layer: over `stack`; beside `console` and `ops`."""
