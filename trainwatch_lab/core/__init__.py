"""What trainwatch_lab watches, and nothing about how it is shown: no Jupyter imports here.

At the top, what every room uses: ``defaults`` (every threshold and default), ``model``
(Sample, Alert), ``sampler`` (the one thread that ticks) and ``history`` (bounded series),
plus small helpers (``identity``, ``limits``, ``procfile``, ``redact``, ``usage``). The rooms,
each importing only the ones listed before it in its own docstring:
``guard`` (the helper process for calls that can hang), ``storage``, ``gpu``, ``processes``,
``paths``, ``worker`` (what the guard's helper runs) and ``record`` (the recorded history).
"""
