"""The trainwatch_lab Jupyter Server extension: REST + WebSocket for the JupyterLab panel.

Its entry points live in the package root (``trainwatch_lab/__init__.py``), which loads
``extension.py`` only when Jupyter calls it; importing this package stays cheap. Rooms:
``fleet/`` (the fleet from Prometheus) and ``recording/`` (the recorded history); the top
modules are the hub, its handlers, config, kernels, paths, scrape and the kernels' attach.
"""
