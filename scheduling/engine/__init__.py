"""The pure scheduling engine: placement, fragmentation, fair share, preemption, backfill, routing.

Nothing here imports a framework, reads a clock, performs I/O or touches global randomness, so every
decision is a function of its inputs (and a ``seed`` where chance is involved). Modules:

* ``placement``     ``ClusterState`` (indexed, mutable: place / commit / release) and ``place``;
                    policies ``POLICIES`` = first-fit, best-fit, fgd, random, and the FGD artifact's
                    kube-scheduler plugins k8s-random, k8s-best-fit, k8s-fgd, plus fgd-cpu and fgd-strand
* ``kube_score``    those plugins' scores: CPU-aware typical pods and fragmentation, integer scores
* ``fragmentation`` FGD fragmentation per node / NVLink domain / fleet, ``largest_placeable``
* ``fairshare``     ``entitlements`` (hierarchical weighted max-min with floors and caps),
                    ``decayed_usage``, ``order_pending``, ``jain_index``
* ``preemption``    ``select_victims`` (+ ``RunningSet`` index, ``apply_victim_plan`` for simulations)
* ``reclaim``       ``plan_reclaims``: borrowed GPUs back for teams below their guarantee (victims by
                    ``preemption``'s rules, bounded by the owners' pending demand, min-runtime, grace)
* ``backfill``      ``easy_backfill`` (+ ``EndingQueue`` for callers that backfill after every change)
* ``routing``       ``route`` (rules) and ``route_by_start`` (the candidate predicted to start first)
* ``startplan``     ``PoolSnapshot``, ``estimate_start``, ``StartPlans`` (a stream, one snapshot): start and position
* ``explain``       ``explain_wait``: a pending workload's wait as a code, what to do, and the numbers
* ``promises``      can real GPUs serve every guarantee and grant at once, across GPU models, over time:
                    ``check_promise`` (approval), ``worsened`` (guarantee edits), ``loads``, ``shortfalls``
* ``sizemix``       request-size mixes (what FGD measures against)
* ``types``         the frozen vocabulary shared with the rest of the project
"""
