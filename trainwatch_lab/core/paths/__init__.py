"""The paths a user watches: names and verdicts (names), one look per tick through the
guard (look, inspection), the watch list (watch), the sampler's source (source), and the
files written under a path since a moment (written).

Imports core's top modules, storage and the guard.
"""
