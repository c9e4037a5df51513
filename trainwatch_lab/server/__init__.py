"""The trainwatch_lab Jupyter Server extension: REST + WebSocket for the JupyterLab panel.

Its entry points live in the package root (``trainwatch_lab/__init__.py``), which loads
``extension.py`` only when Jupyter calls it; importing this package stays cheap.
"""
