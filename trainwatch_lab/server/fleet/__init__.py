"""The fleet for the panel: ``GET api/fleet`` and ``fleet/range`` (api), the listing folded
in its own worker process (listing), and Prometheus's HTTP API asked from the server, never
the browser: tornado's client for one host's charts (promclient), a blocking one in the
listing's worker (promfetch).

Imports the server's config and handlers and prometheus.fleet's folding; nothing of the
server but extension.py imports it.
"""
