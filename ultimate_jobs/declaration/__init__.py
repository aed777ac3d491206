"""What a job is, with no database and no settings: the definition @job freezes, the
registry, the input's signature (payload), retry policies, durations, queue names,
retention rules, the states, and the run context a body receives (J1-J7, R1-R3)."""

from __future__ import annotations
