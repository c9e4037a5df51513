"""``%%trainwatch``: watching one cell while it runs (magic, run), the warnings it saw
(warnings) and the summary shown under it when it ends (summary, report).

Imports only the notebook's leaf modules (ticks, warnings_html); never the dashboard.
"""
