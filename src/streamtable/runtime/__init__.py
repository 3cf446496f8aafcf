"""Runtimes that execute a topology for real (the test driver lives in streamtable.testing)."""
