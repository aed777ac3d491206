"""The maintenance room: the leader's chores, one module each, and the host that runs
them (host.py) while it leads; the leader lease itself (leader.py, C3)."""
