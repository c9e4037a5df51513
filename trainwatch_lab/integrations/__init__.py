"""Framework callbacks that apply the fixes where training happens.

One module per framework, each importing its framework only when the module itself is
imported (``from trainwatch_lab.integrations.lightning import TrainWatchCallback``); this
package imports none of them. What every callback does is in ``watch.py``: at train start,
check the log and checkpoint directories (an inline warning in a notebook, a log line
elsewhere), and before each checkpoint compare the newest save with the free space, from
readings taken on a daemon thread, so no step ever waits on a share.
"""
