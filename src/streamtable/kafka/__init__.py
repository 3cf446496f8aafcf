"""Kafka I/O (temporary)."""
