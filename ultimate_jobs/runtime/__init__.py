"""The worker's engine (W1-W9, O2, N1, N3): claim, admit, execute, settle, acknowledge,
heartbeat and drain; the relay that publishes the outbox; the LISTEN wake-up and the
stop switch every loop of a process shares."""

from __future__ import annotations
