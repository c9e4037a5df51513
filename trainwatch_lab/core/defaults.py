"""Every threshold and default in one place, so surfaces and detectors never disagree.

Change a value by passing a modified copy (``dataclasses.replace(DEFAULTS, ...)``) to the
Sampler/Advisor; nothing reads these names at import time elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2
MB_PER_MIB = MIB / 1e6  # DiskRates counts MiB/s (iostat -m); every surface shows decimal MB/s


@dataclass(frozen=True)
class Defaults:
    # sampling and history
    interval_s: float = 1.0
    min_interval_s: float = 0.05  # faster sampling costs more than any chart can show
    max_history_samples: int = 86_400  # a day at 1 s: caps memory whatever interval/history
    max_watched_paths: int = 64  # each costs a statvfs per tick and a helper per mount
    history_s: float = 3600.0  # kept per series in the server
    window_s: float = 600.0  # shown in charts
    # samples in one history reply at most (every k-th past it): a chart's width, several times
    history_reply_points: int = 1200
    # mount access (every call that can touch a mount goes through core.guard.guard)
    mount_timeout_s: float = 2.0
    # a helper stopped while it probes gets SIGTERM (it removes its temp file), SIGKILL
    # this much later; a call past its time needs this long to give its helper up
    guard_term_grace_s: float = 5.0
    guard_holder_grace_s: float = 1.0
    # exports (CSV) are written by a guard helper: this long, plus 1 s per this many bytes
    export_timeout_s: float = 10.0
    export_bytes_per_s: float = float(MIB)
    # latency probe: small writes + fsync to a hidden temporary file
    probe_writes: int = 16
    probe_block_bytes: int = 4096
    probe_budget_s: float = 2.0
    probe_every_s: float = 60.0  # re-probe a watched path at most this often
    # ... but a path looked at locally sits on a local block device (or in memory), whose
    # latency diskstats shows every tick (await): the probe there repeats this rarely
    local_probe_every_s: float = 600.0
    # checkpoint scan: its own helper and budget, so a big directory on a slow share
    # reports what it saw instead of tripping the statvfs timeout (mount-unresponsive)
    checkpoint_scan_budget_s: float = 1.0
    # fix/ (local_mirror, save_checkpoint): how long training code ever waits on a share.
    # A save asked for while another is still in flight waits this long for it, then is
    # skipped with one line (a background save) or refused (SaveInFlight): a share that
    # hangs mid-save must not hold the training loop for ever
    save_busy_wait_s: float = 10.0
    # interpreter exit waits this long for a background save in flight, then says which
    # save did not land (the earlier one is intact) and exits
    save_exit_wait_s: float = 30.0
    # save_checkpoint(on_full="wait"): a save that would not fit checks the space again this
    # often (a statvfs and a listing: cheap) and gives up after this long with one error,
    # nothing written (an hour: someone can come and free space after a notification)
    save_full_recheck_s: float = 5.0
    save_full_wait_s: float = 3600.0
    # a save's decisions (room made, paused, resumed...) are recorded by a thread of their
    # own: at most this many wait for it, and the interpreter's exit waits this long for them
    save_events_queued: int = 64
    save_events_exit_wait_s: float = 2.0
    # `check` attached to a server waits the server's budget (advice.check.check_budget_s)
    # and this for the server's loop and the socket
    attach_check_margin_s: float = 5.0
    # a share's mirror lock not refreshed for this long (its holder on another host is
    # gone, or cannot reach the share) may be taken over by another mirror
    mirror_lock_stale_s: float = 900.0
    # local_mirror's local disk is kept this free: the smaller of a share of it and a size.
    # Under twice that, event-file records already copied are released locally (padding,
    # the blocks punched out); under it, the oldest records not yet copied are dropped the
    # same way, said in the status and one warning line: the writer never meets ENOSPC. A
    # writer must not write more than the reserve between two looks (every this often)
    mirror_reserve_fraction: float = 0.10
    mirror_reserve_bytes: int = GIB
    mirror_room_every_s: float = 0.25
    # %%trainwatch lists the files a cell wrote under its paths (the same helper lane, each
    # path within the scan budget) as its output waits: all paths together, at most this
    cell_files_budget_s: float = 3.0
    baseline_ttl_s: float = 600.0  # local-disk baseline is re-measured after this
    # slow-mount
    slow_p50_ms: float = 10.0
    slow_vs_baseline: float = 10.0
    # the ratio rule needs this much absolute latency: a 0.05 ms baseline would make every
    # real disk "slow", and VM disks often take one 4 ms timer tick per fsync
    slow_ratio_min_ms: float = 5.0
    # ... it is also where a probe starts to look slow: such a probe is repeated at once,
    # with the local reference measured again at the same moment on its own storage; a
    # local disk counts as slow only while that reference stays under this (a burst of
    # fsyncs from other processes slows every disk of the machine alike)
    slow_reference_fast_ms: float = 5.0
    slow_min_probes: int = 2  # probes in a row that must look slow: one can catch a burst
    # disk-almost-full
    full_fraction: float = 0.10
    full_bytes: int = 2 * GIB  # applies to filesystems larger than this
    full_critical_fraction: float = 0.01  # disk-almost-full turns critical under this
    # the blocks only root may write are named beside free space when they are this share
    # of the disk (ext4 reserves 5 % by default: df's Size - Used - Avail)
    reserved_shown_fraction: float = 0.01
    # disk-filling
    fill_horizon_s: float = 3600.0
    fill_critical_s: float = 600.0
    # least-squares window for the growth rate: long enough to hold three saves at a
    # cadence of a few minutes (a fill made of checkpoints is seen by its cadence)
    fill_window_s: float = 600.0
    # writes that make a fill when they come as separate bursts with pauses between them
    # (checkpoints): two saves are a coincidence, three a cadence
    fill_min_bursts: int = 3
    fill_min_points: int = 5  # readings in the stretch of shrinking free space, at least
    fill_min_rate_bps: float = 64 * 1024  # below this a "fill rate" is noise
    # disk-filling warns about a fill that has lasted this share of the time it has left
    # (capped at fill_min_span_s, at least fill_min_trend_s): a steady fill that ends in
    # ENOSPC within a minute is warned about before half-way, while one checkpoint burst,
    # over in seconds with most of the space still free, is no trend
    fill_trend_share: float = 0.8
    fill_min_span_s: float = 30.0
    fill_min_trend_s: float = 5.0
    # free space that has not gone down for this many times the longest gap between its
    # drops (and at least two readings) has stopped filling: the rate shown decays to none
    fill_quiet_gaps: float = 2.0
    # a sampler whose own history holds less than fill_window_s of a filesystem also reads
    # the recorded free space (core.record.past) for the older part: at most once per
    # fill_past_refresh_s per filesystem, waiting at most fill_past_timeout_s on the store
    fill_past_refresh_s: float = 5.0
    fill_past_timeout_s: float = 0.25
    # disk-saturated
    saturated_util_pct: float = 80.0
    saturated_await_ms: float = 10.0
    saturated_for_s: float = 10.0
    # gpu
    gpu_processes_every_s: float = 5.0
    gpu_static_ttl_s: float = 60.0
    gpu_pcie_every_s: float = 5.0  # each NVML PCIe read samples the bus for ~20 ms
    gpu_idle_util_pct: float = 5.0
    gpu_stalled_for_s: float = 30.0
    gpu_starved_window_s: float = 60.0
    gpu_starved_mean_util_pct: float = 50.0
    gpu_starved_stdev_pct: float = 20.0
    gpu_starved_min_read_bps: float = 1e6  # device reads below this are no data path
    # gpu-starved needs storage to be the limit (advice.gpu.feed, issue 16 item 7): the watched
    # tree's block reads at least this share of its busiest watched device's reads (the device
    # serves us, not another job or our checkpoint writes) ...
    gpu_starved_read_share: float = 0.5
    # ... waiting this long on average: a local SSD that keeps up answers well under 1 ms, a
    # saturated one (requests queued), a hard disk or a network block device takes longer
    gpu_starved_read_await_ms: float = 2.0
    # ... while the loaders (DataLoader workers, else the main thread) slept on file reads at
    # least this share of the time: a third of their time is storage's, so faster storage
    # speeds them up by half (measured: 3 workers reading a cold loop device sit at 35-60 %)
    gpu_starved_wait_share: float = 0.3
    # input-cpu-bound (info): the loaders slept on files under this share of the time (a gap
    # below gpu_starved_wait_share: between the two, neither verdict), and the loop waited
    # on its workers' queue at least this share, or (no workers) was on a CPU this share
    gpu_input_file_wait_max: float = 0.1
    gpu_input_loop_waits: float = 0.5
    gpu_input_loop_busy: float = 0.9
    disk_busy_util_pct: float = 60.0
    # gpu-stalled fires only after real GPU work (at least this utilization) in the last
    # minutes of a busy process: a model kept in memory while the user reads results is no stall
    gpu_work_util_pct: float = 20.0
    gpu_stalled_work_within_s: float = 300.0
    # gpu-throttled: thermal/power clock-event reasons held this long while the GPU is at least
    # this busy (an idle GPU lowering its clocks is no news; a minute is no passing spike)
    gpu_throttled_for_s: float = 60.0
    gpu_throttled_busy_pct: float = 50.0
    # gpu-error: an XID stays reported this long (the driver sends it once); volatile
    # uncorrectable ECC errors above this count are an error (any one is)
    gpu_error_keep_s: float = 600.0
    gpu_ecc_uncorrected_max: int = 0
    # time lost to storage (core.processes.waits, issue 15): observations of the watched process's
    # main thread per second (its sleep time itself is exact, from schedstat: these only say
    # what it slept on); chosen from the accuracy/cost curve of tests/benchmarks/bench_waits.py
    wait_rate_hz: float = 10.0
    # ... while the loop hardly sleeps (CPU-bound) or only idles on no file (a kernel between
    # cells): nothing to tell apart, so a look a second, enough to notice the change
    wait_quiet_rate_hz: float = 1.0
    wait_pool_min: int = 20  # sleeping observations behind a split, pooled over ticks ...
    wait_pool_s: float = 10.0  # ... from this far back at most ...
    wait_change_looks: int = 3  # ... and not past a tick that shares nothing with this many
    wait_max_workers: int = 32  # worker processes looked at (in turn, one per observation)
    wait_idle_stop_s: float = 5.0  # the sampling thread stops when no tick asked for this long
    # a path whose share of the time is below this gets no words (half a percent: less than
    # the sampling can tell from zero over a short cell)
    wait_shown: float = 0.005
    # io-bound: TensorFlow's input-pipeline analysis calls 5 % of step time waiting on input
    # "moderately" and 20 % "highly" input-bound; the same cut-offs for time lost to storage
    io_bound_moderate: float = 0.05  # info
    io_bound_high: float = 0.20  # warning
    io_bound_window_s: float = 60.0  # averaged over this long: one checkpoint is no verdict
    io_bound_min_s: float = 10.0  # measured time in that window before any verdict
    # worker processes that spend this much of their time waiting on storage feed the loop
    # slower than they could (a verdict on its own: the loop's wait is on a pipe, not a file)
    io_bound_workers: float = 0.50
    # training processes outside the notebook (core.processes.source)
    training_scan_every_s: float = 3.0  # "within a few seconds": a script started now is listed
    training_cpu_share: float = 0.01  # the scan's CPU, at most, however many processes run
    max_training_processes: int = 8  # rows, each with its own I/O reader
    max_training_paths: int = 16  # directories added on top of the user's (64 in all at most)
    # fanotify reads per discovery pass (64 KiB, ~2,700 files closed after writing, each):
    # a busy root filesystem cannot make one pass unbounded; the rest waits for the next
    write_watch_max_reads: int = 64
    # a file at least this large closed after writing under a watched path makes its writer a
    # run (a checkpoint, an array, a shard), a source file an editor saved does not
    write_watch_min_bytes: int = 1 << 20
    # `history why` (core.record.why): with "No space left on device" in a run's stderr, its
    # disk counts as full under this share of its size (a 4 MiB save failed on a 64 MiB ext4
    # with 1.5 MB still free: the filesystem's reserve and metadata) but never above this
    why_nearly_full_share: float = 0.05
    why_nearly_full_max_bytes: int = 64 * MIB
    # `trainwatch-lab serve`: Prometheus's exporter range 9100-9999 is allocated in full (the
    # wiki's list goes on from 10000, one port at a time); this one is far past that, below
    # Linux's ephemeral ports (32768+) and in no /etc/services entry
    serve_port: int = 10917
    # the agent under load (issues 24, 34), as exporter-toolkit's node_exporter: at most this
    # many requests in flight (--web.max-requests; an idle connection costs a descriptor, not
    # a slot), 503 past it; a connection must deliver its next request's whole header within
    # the idle timeout of its connect or its last answer (Prometheus scrapes every 15-60 s on
    # a kept-alive connection), a body within the body timeout, at most these many bytes of
    # either; accept() failing for want of descriptors (EMFILE) waits, doubling from 5 ms to
    # 1 s, as Go's http.Server does, instead of spinning
    serve_max_requests: int = 40
    serve_idle_timeout_s: float = 120.0
    serve_body_timeout_s: float = 10.0
    serve_max_header_bytes: int = 64 * 1024
    serve_max_body_bytes: int = 64 * 1024
    # basic auth (prometheus.basicauth): answers remembered (right ones and wrong ones apart,
    # each this many), bcrypt run on one thread, at most this many requests waiting for it
    # (503 past it; a remembered password never waits)
    serve_auth_cache: int = 1024
    serve_auth_queue: int = 32
    # where the host's procfs, sysfs and root filesystem are (core.hostfs): as they are for
    # a kernel, a server or an agent on the node; an agent in a container (a DaemonSet, as
    # node_exporter runs) is given the host's, mounted read-only at e.g. /host/proc,
    # /host/sys and /host/root (--path.procfs, --path.sysfs, --path.rootfs)
    host_procfs: str = "/proc"
    host_sysfs: str = "/sys"
    host_rootfs: str = "/"
    # the most of a mount table read (core.storage.mounts): 50,000 mounts at ~150 bytes a
    # line, far past a busy Kubernetes node (a few thousand); a bigger one is refused with a
    # note, never read cut short (paths would land on the wrong mounts)
    mountinfo_max_bytes: int = 8 << 20
    # notifications (advice.notify, issue 17): a webhook hears of a warning when it starts and
    # when it clears, at most once per warning per this long; a failing target is retried with
    # backoff on the notifier's own thread, which holds at most notify_queue messages
    notify_repeat_s: float = 600.0
    notify_timeout_s: float = 10.0  # one POST; a hanging webhook costs this, never a sample
    notify_retries: int = 5  # attempts after the first
    notify_backoff_s: float = 2.0  # first wait before a retry, doubled each time ...
    notify_backoff_max_s: float = 120.0  # ... up to this
    notify_queue: int = 100
    # quotas only a tool reads (core.storage.quota_tools: Lustre's `lfs quota`, NFS rquota through
    # `quota`): each tool runs on its own thread, at most every quota_tool_every_s (one RPC
    # to the servers per run, not one per tick); the first read of a mount waits this long
    # for it, later reads never wait (they get the last answer); a run is killed after
    # quota_tool_timeout_s (a hung server costs that thread, never a tick)
    quota_tool_every_s: float = 10.0
    quota_tool_wait_s: float = 0.5  # well under mount_timeout_s: the helper's look waits it
    quota_tool_timeout_s: float = 10.0
    # the recorded history (core.record, issue 27): a sample every record_look_every_s while
    # someone looks (a panel, a terminal running `watch`), every record_every_s otherwise
    record_look_every_s: float = 1.0
    record_every_s: float = 10.0
    # the server records numbers only while something is worth it (a training process, a
    # busy kernel, a path a user added, a warning, a panel open) and this long after, so
    # the end of a run is there; then its sampler stops (an idle server used 0.26 % of a
    # core with it running, 0.05 % without: tests/benchmarks/bench_idle_server.py) once it
    # ran at least record_idle_after_s (its discovery's first passes), and a cheap look for
    # training processes and busy kernels runs every record_idle_check_s instead (one
    # procfs pass, ~2 ms for 120 processes)
    record_tail_s: float = 300.0
    record_idle_after_s: float = 30.0
    record_idle_check_s: float = 10.0
    # written every this long: what a writer killed with SIGKILL loses at most
    record_flush_s: float = 10.0
    # ... and at the next tick, sooner, while a recorded filesystem's free space falls fast:
    # by more than this share of what was free at the last flush (at that pace it is full
    # within ~100 flush intervals), or when a disk-filling / disk-almost-full is raised. A
    # sampler started mid-fill reads the recorded past (core.record.past) and lagged the
    # panel by up to a flush interval; a disk that holds still, however full, flushes at the
    # usual pace, and each early flush needs 1 % more of the free space gone: few per fill
    record_hurry_drop_share: float = 0.01
    # points per closed block: 10 min at 1 s, 100 min at 10 s (zlib needs a few hundred
    # values to fold the runs, and its header and tables cost ~40 B a block: 300 points
    # took 0.90 B a value in tests/benchmarks/bench_record.py, 600 took 0.79 B)
    record_block_points: int = 600
    record_keep_s: float = 7 * 86_400.0  # everything older is dropped (an event says so)
    # recorded points are kept this long, then thinned to one mean per record_thin_step_s
    # (netdata's tiers: per second, then per minute)
    record_raw_s: float = 86_400.0
    record_thin_step_s: float = 60.0
    record_max_bytes: int = 256 * MIB  # the file's size cap: older data is thinned, then dropped
    # recording pauses (with a note) while its filesystem has less than this free, so the
    # history never fills a disk that training needs; it resumes when space returns
    record_min_free_bytes: int = 256 * MIB
    record_busy_timeout_s: float = 5.0  # a writer waits this long for another's transaction
    # `run -- CMD` records on a thread of its own, after the command started: at the end it
    # waits this long for the record (the store opened, the end written: two busy waits and
    # a margin), then exits with the command's code whatever the store does
    run_record_wait_s: float = 15.0
    record_maintain_every_s: float = 600.0  # thinning and dropping run this often
    record_buffer_points: int = 3600  # points held per series while paused: memory bounded
    # a replay's chart reads one series at a time in slices this long, folding each into
    # the chart's buckets (memory: one slice, whatever the window), and stops with
    # "truncated" after decoding this many points (7 days of 3 series at 1 s): one GET
    # never holds the query thread for long
    record_query_slice_s: float = 6 * 3600.0
    record_query_max_decoded: int = 2_000_000
    # `history --format csv` writes a slice of time at a time, holding about this many
    # points (a week of 120 series at 1 s whole took 1.7 GB): the slice is this over the
    # number of series, at least a minute
    record_csv_slice_points: int = 200_000
    # `%trainwatch --since 8h` waits this long for the replay's read (on a helper thread) so
    # that a missing history is one printed line, not a widget; a slower read shows the
    # widget at once, saying it is reading, and fills it in when the read ends
    replay_wait_s: float = 10.0

    # the fleet listing's fold (a thread of its worker process; the worker's HTTP is not)
    # runs this much nicer than the server: on a machine with fewer free cores than busy
    # threads, the event loop gets a core before the fold
    fleet_worker_nice: int = 10
    # a listing that has to start the worker first may take this much longer (Python and
    # the fold's imports, on a loaded machine); Prometheus's timeout counts from when the
    # worker takes the listing, so a slow start is never said to be Prometheus's
    fleet_worker_start_s: float = 15.0


DEFAULTS = Defaults()

# What any input may weigh (issue 24): a path longer than Linux's PATH_MAX (bytes, with its
# NUL) names no file, so nothing longer is worth a byte of memory; a request body holds one
# path and a few fields; a stream message is {"interval": S}; a query parameter is a path,
# a number or a word. Past these, a request is refused in one line before anything is kept.
PATH_MAX = 4096
REQUEST_BODY_MAX = 16 * 1024
WS_MESSAGE_MAX = 4096
PARAM_MAX = PATH_MAX
# a stream client that has not taken the message before for this long is closed (it gets only
# the latest sample meanwhile, never a queue of them: issue 34)
WS_STALLED_CLOSE_S = 60.0
# one answer of Prometheus's API, decompressed (tornado's client refuses more, its default
# buffer): 10,000 hosts' largest answer, every filesystem's, is about 12 MB
PROMETHEUS_ANSWER_MAX = 100 * 1024 * 1024

# a root's mirror-status lister (fix.mirror.files) waits this long for the next look before its
# thread ends: at the server's 1 s ticks one thread per root lives on instead of one started
# per root every tick (issue 33: thread starts were a fifth of the tick's CPU)
MIRROR_LANE_IDLE_S = 30.0

# checkpoint files by name: torch.save / Lightning / Accelerate / Hugging Face (.pt .pth .ckpt
# .safetensors .bin), Keras 3 (.keras whole models, .weights.h5 weights)
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".h5", ".keras")
