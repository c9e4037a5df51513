"""The GPU warnings: an idle or starved GPU explained by its storage (detectors), the
storage evidence they quote (evidence), what feeds the GPU (feed), a stall on a dead mount
(stall) and the GPU's own health, XID errors and throttling (health).

Imports advice's top modules (context, text, storage, io_bound) and core; advice.registry
assembles the detectors, nothing here imports it.
"""
