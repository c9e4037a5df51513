"""Detectors over a Sample and its History that turn measurements into plain-language warnings.

Top modules: the advisor and the check that run the detectors, their context and registry,
the storage, device and I/O-bound detectors, the headline, the words (text) and the
notifications (notify, notify_sign). Room: ``gpu/`` (the GPU warnings).

No Jupyter imports here; thresholds come from ``core.defaults``.
"""
