"""``TrainWatch``, the ipywidgets/bqplot dashboard (widget): its charts (charts, bqcharts),
layout, header (view), warnings pane, snapshot text, export, saved preferences, and the
replay of the recorded history (replay: ``%trainwatch --since``, ``TrainWatch(since=...)``).

Imports only the notebook's leaf modules (export, fix_status, inline, settings, ticks,
warnings_html); the kernel's watch and the magics import it, never the other way.
"""
