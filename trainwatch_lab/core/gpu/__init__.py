"""The GPUs: NVML readings per tick (source), what never changes (static), MIG instances,
the container's view of the GPUs, health events (XID, throttling), the processes on each GPU,
the user's selection and numbering.

Imports only core's top modules (defaults, model): the GPU code knows nothing of storage.
"""
