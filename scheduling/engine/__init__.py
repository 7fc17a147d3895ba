"""The pure scheduling engine: placement, fragmentation, fair share, preemption, backfill, routing.

Nothing here imports a framework, reads a clock, performs I/O or touches global randomness, so every
decision is a function of its inputs (and a ``seed`` where chance is involved).
"""
