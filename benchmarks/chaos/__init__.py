"""The chaos run (scripts/chaos, docs/operations.md): faults under load, then checks."""
