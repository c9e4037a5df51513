"""Data sources, the Sampler and the History: no Jupyter imports allowed here."""
