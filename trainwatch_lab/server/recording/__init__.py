"""The recorded history (issue 27) on the server: the recorder that keeps what the server's
sampler sees on disk (recorder) and the read-only endpoints the panel's replay asks,
``GET api/recorded``, ``recorded/events`` and ``recorded/why`` (api).

Imports the server's handlers, kernels and kernel requests and core.record; the hub starts
the recorder, extension.py serves the endpoints.
"""
