"""Detectors over a Sample and its History that turn measurements into plain-language Alerts.

No Jupyter imports here; thresholds come from ``core.defaults``.
"""
