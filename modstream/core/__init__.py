"""Shared basics with nothing of modstream under them: settings, limits, the topic table, ids,
bounded Kafka I/O (bytes only), logs, redaction and progress. Layer: the bottom one; every
other package may import it."""
