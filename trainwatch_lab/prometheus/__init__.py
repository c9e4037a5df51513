"""Prometheus for a fleet: metrics from a Sample (``metrics``), alerting rules generated from
the defaults (the room ``rules/``), and the per-node agent behind ``trainwatch-lab serve``
(``agent``).

Prometheus scrapes, stores and alerts; we write no collector service and no store. Nothing
here samples: a scrape formats the latest Sample a Sampler already took.
"""
