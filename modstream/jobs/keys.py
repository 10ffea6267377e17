"""A job's keyring at start (modstream/trust/keyring.py, docs/RELIABILITY.md, "Signed authority
inputs"): read once from the environment, the dev secret refused unless the job's brokers are a
local stack's, and every setting that lowers the secure defaults logged before the job runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from modstream.trust.keyring import Keyring, refuse_dev_secret


def job_keyring(
    name: str,
    bootstrap_servers: str,
    kafka_properties: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> Keyring:
    """The keyring job `name` verifies or signs with; SystemExit naming the setting when it
    is malformed or a dev secret meets brokers that are not local."""
    try:
        keyring = Keyring.from_env(env)
        protocol = kafka_properties.get("security.protocol", "PLAINTEXT")
        refuse_dev_secret(keyring, bootstrap_servers, protocol)
    except ValueError as error:
        raise SystemExit(f"{name}: {error}") from None
    log = logging.getLogger(f"modstream.{name}")
    for line in keyring.insecure_settings():
        log.warning("%s: insecure setting %s", name, line)
    return keyring
