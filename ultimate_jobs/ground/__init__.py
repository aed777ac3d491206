"""The ground: what every layer may import and which imports nothing of the package
but itself (docs/architecture.md).

``exceptions`` (the error tree and its stable codes, R5), ``signals`` (the Django
signals, P4), ``keyset`` (keyset pages over a QuerySet, F1, F4), ``ids`` (time-ordered
ids, H5), ``context`` (the run's tenant and correlation id in context variables, J3,
M2), ``bounds`` (what PostgreSQL cannot hold, refused before any statement, B4),
``durations`` (one parser of every duration, J5, T) and ``cancel`` (the token a body
polls to stop, W4).
"""
