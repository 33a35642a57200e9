"""The base layer: errors, tokens, checks, flows, logging, telemetry; the standard library only."""
