"""Detectors over a Sample and its History that turn measurements into plain-language warnings.

No Jupyter imports here; thresholds come from ``core.defaults``.
"""
