"""The rules file of ``trainwatch-lab rules``: the alerting rules that mirror the warnings,
by what they watch (storage, gpu, loop), the fleet's recording rules (fleet), the pieces
they share (base) and the file that orders and writes them (ruleset).

Imports only core and advice's words and fixes; prometheus's top modules (fleet, dashboard)
read the recording rules' names from here, never the other way.
"""
