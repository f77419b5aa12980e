"""How the worker cluster (`manage.py qcluster`) stops: within seconds of SIGTERM, losing no
work.

django-q2 1.11 stops a cluster by letting each worker finish its task and then reading a
"STOP" from the task queue behind every task already taken from the broker, with no time
limit: a worker in an hour-long turn holds the stop for an hour, and tasks still waiting
are started first. Here instead:

- once the cluster is told to stop, a worker starts no task: one it takes goes back to the
  broker, and so do the tasks still waiting in the cluster's own queue;
- a worker gets `STOP_GRACE` seconds to finish what it runs; then it hands its turns back
  (`sessions_app.runs.hand_back_runs`: the sweep, `fail_dead_runs`, which the stopping process runs
  next, fails them with a plain reason and tells the chats and parents that wait on them) and
  exits, and is killed if it has not after `HAND_BACK_WAIT`. A task of a worker that had no
  turn under way (a memory consolidation, a turn still waiting for its session) goes back
  to the broker, for the next start.

SIGTERM sent to a worker itself (a service manager stopping the whole process group) hands
its turns back the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from typing import Any

from django.db import connections
from django.utils import timezone
from django_q import cluster as q_cluster
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.signals import post_execute_in_worker, post_spawn, pre_execute
from django_q.signing import SignedPackage
from django_q.status import Stat

from agent.processes import alive

logger = logging.getLogger(__name__)

# Seconds, from the stop, that a busy worker has to finish its task.
STOP_GRACE = 3.0
# Then for it to hand its turns back and exit, before it is killed.
HAND_BACK_WAIT = 2.0
# How often a worker looks whether it is told to.
HAND_BACK_POLL = 0.2
# Then for the monitor to save the results of the tasks that finished.
MONITOR_WAIT = 2.0
# From the signal to the end of the cluster's processes, whatever they are doing.
HARD_STOP = 8.5
PILL = "STOP"
# Room for the pids of every worker the cluster starts (recycled workers take a dead one's).
WORKER_SLOTS = 256


class Stopping:
    """Flags shared with every process the cluster forks: made before it forks them.

    Plain shared bytes, not events: a multiprocessing event's `set` waits for every process
    that waits on it to wake, and a worker that has exited never does."""

    def __init__(self) -> None:
        context = q_cluster.get_mp_context()
        self._requested = context.RawValue("b", 0)
        self._hand_back = context.RawValue("b", 0)
        self._workers = context.RawArray("i", WORKER_SLOTS)
        self._workers_lock = context.Lock()
        self.told_sentinel = False  # the cluster's own process only

    @property
    def requested(self) -> bool:
        """Workers take no new task."""
        return bool(self._requested.value)

    @property
    def hand_back(self) -> bool:
        """Busy workers hand their turns back and exit."""
        return bool(self._hand_back.value)

    def request(self) -> None:
        self._requested.value = 1

    def tell_hand_back(self) -> None:
        self._hand_back.value = 1

    def add_worker(self, pid: int) -> None:
        """Known to the cluster's own process, which outlives the sentinel: a signal to the
        whole group kills the sentinel at once, and its workers, orphaned, still hand their
        turns back."""
        if not self._workers_lock.acquire(timeout=1):
            return
        try:
            for slot, known in enumerate(self._workers):
                if not known or not alive(known):
                    self._workers[slot] = pid
                    return
        finally:
            self._workers_lock.release()

    def workers_alive(self) -> list[int]:
        return [pid for pid in list(self._workers) if pid and alive(pid)]


_stopping: Stopping | None = None
_current_task: dict[str, Any] | None = None
_exiting = threading.Lock()


def prepare() -> Stopping:
    """Make the shared flags and hook the workers; call before the cluster starts."""
    global _stopping
    _stopping = Stopping()
    post_spawn.connect(_on_spawn, dispatch_uid="agent.cluster.spawn")
    pre_execute.connect(_on_execute, dispatch_uid="agent.cluster.execute")
    post_execute_in_worker.connect(_on_executed, dispatch_uid="agent.cluster.executed")
    return _stopping


class GracefulCluster(q_cluster.Cluster):
    """django-q2's cluster, whose sentinel stops as this module says."""

    def start(self) -> int:
        # django-q2 makes its sentinel from this module-level name when it starts.
        original = q_cluster.Sentinel
        q_cluster.Sentinel = GracefulSentinel  # type: ignore[misc]
        try:
            return super().start()
        finally:
            q_cluster.Sentinel = original  # type: ignore[misc]


class GracefulSentinel(q_cluster.Sentinel):
    pool: list[Any]  # django-q2's worker processes

    def stop(self) -> None:
        assert _stopping is not None, "prepare() makes the flags before the cluster starts"
        Stat(self).save()
        deadline = time.monotonic() + STOP_GRACE
        self.event_out.set()  # the pusher takes nothing more from the broker
        while self.pusher.is_alive() and time.monotonic() < deadline:
            self._give_back_waiting()  # a pusher blocked on a full queue can then end
            time.sleep(0.1)
        if self.pusher.is_alive():
            self.pusher.kill()
        self._give_back_waiting()
        for _ in self.pool:
            self.task_queue.put(PILL)
        self._wait_for_workers(deadline)
        if self.pool:
            logger.warning(
                "%d worker(s) still busy %g s after the stop: their turns are handed back",
                len(self.pool),
                STOP_GRACE,
            )
            _stopping.tell_hand_back()
            self._wait_for_workers(time.monotonic() + HAND_BACK_WAIT)
            for process in self.pool:
                logger.error("worker %s did not hand its turns back; killing it", process.pid)
                process.kill()
                process.join(1)
            self.pool = []
        self._give_back_waiting()  # what the workers left, and their unread pills
        # Nothing reads the task queue any more: its feeder must not wait for a reader.
        self.task_queue.cancel_join_thread()
        self.task_queue.close()
        self.result_queue.put(PILL)
        self.result_queue.close()
        self.result_queue.join_thread()
        self.monitor.join(MONITOR_WAIT)
        if self.monitor.is_alive():
            logger.warning("the monitor did not save every result in time; stopping it")
            self.monitor.terminate()
        Stat(self).save()

    def _wait_for_workers(self, deadline: float) -> None:
        while self.pool and time.monotonic() < deadline:
            self.pool = [process for process in self.pool if process.is_alive()]
            time.sleep(0.1)
            Stat(self).save()

    def _give_back_waiting(self) -> None:
        """Return the tasks waiting in the cluster's queue to the broker. A worker waiting
        on the queue holds its lock: then the tasks are that worker's to give back."""
        while True:
            try:
                task = self.task_queue.get(timeout=0.05)
            except queue.Empty:
                return
            if task != PILL:
                give_back(task)


def give_back(task: dict[str, Any]) -> None:
    """Put a task that was taken but not run back in the broker, for the next worker."""
    broker = get_broker()
    ack_id = task.get("ack_id")
    try:
        if isinstance(broker, ORM) and ack_id is not None:
            # Still in the broker's table, locked for this cluster: unlocked, it is next.
            broker.get_connection().filter(pk=ack_id).update(lock=timezone.now())
        else:
            package = {k: v for k, v in task.items() if k not in ("ack_id", "cluster")}
            broker.enqueue(SignedPackage.dumps(package))
            if ack_id is not None:
                broker.acknowledge(ack_id)
    except Exception:
        logger.exception("could not give task %s back to the broker", task.get("name"))
        return
    logger.info("gave task %s back to the broker for the next start", task.get("name"))


def _on_execute(task: dict[str, Any], **kwargs: Any) -> None:
    """In a worker, before each task: remember it; once the cluster stops, start none."""
    global _current_task
    if _in_caller():
        return
    if _stopping is not None and _stopping.requested:
        give_back(task)
        connections.close_all()
        raise SystemExit(0)  # the worker ends here, quietly
    _current_task = task


def _on_executed(**kwargs: Any) -> None:
    """In a worker, once a task has run: a hand-back from now on must not give it back."""
    global _current_task
    _current_task = None


def _on_spawn(**kwargs: Any) -> None:
    """In a worker, as it starts: it hands its turns back when told, or on SIGTERM."""
    if _in_caller():
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    if _stopping is not None:
        _stopping.add_worker(os.getpid())
        threading.Thread(target=_hand_back_when_told, args=(_stopping,), daemon=True).start()


def _in_caller() -> bool:
    """Whether django-q2 runs tasks in the caller's own thread (its `sync` mode, which the
    tests use): a worker's signals are then sent in whatever process called, which is no
    worker of a cluster and must not be made one."""
    return bool(Conf.SYNC)


def _hand_back_when_told(stopping: Stopping) -> None:
    while not stopping.hand_back:
        time.sleep(HAND_BACK_POLL)
    _hand_back_and_exit()


def _on_sigterm(signum: int, frame: Any) -> None:
    # The work needs the database: in a thread of its own, off whatever the main one was doing.
    threading.Thread(target=_hand_back_and_exit, daemon=True).start()


def _hand_back_and_exit() -> None:
    if not _exiting.acquire(blocking=False):
        return
    from agent.turn import watched_runs
    from sessions_app.runs import hand_back_runs

    try:
        runs = watched_runs()
        if runs:
            handed = hand_back_runs(run_ids=runs)
            logger.warning("worker %s stopping: handed back %d turn(s)", os.getpid(), handed)
            if _current_task is not None and _current_task.get("ack_id") is not None:
                # Its turns are the sweep's to end: the task must not run them again.
                get_broker().acknowledge(_current_task["ack_id"])
        elif _current_task is not None:
            give_back(_current_task)
    except Exception:
        logger.exception("worker %s could not hand its work back", os.getpid())
    finally:
        connections.close_all()
        os._exit(0)


def stop(cluster: q_cluster.Cluster, stopping: Stopping, *, signalled: float) -> bool:
    """Wait for the stopping cluster's processes to end, killing what is left of them
    `HARD_STOP` seconds after the signal. Whether turns may have been handed back, for the
    caller to end them (`fail_dead_runs`): the workers were told to, or killed, or the
    sentinel died of a signal (a service manager that stops the whole process group)."""
    request_stop(cluster, stopping)
    sentinel = cluster.sentinel
    if sentinel is None:
        return False
    deadline = signalled + HARD_STOP
    if sentinel.is_alive():
        sentinel.join(max(0.0, deadline - time.monotonic()))
    if sentinel.is_alive() and sentinel.pid is not None:
        logger.error("the cluster did not stop in %g s; killing its processes", HARD_STOP)
        for pid in [*_descendants(sentinel.pid), sentinel.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        sentinel.join(1)
        return True
    if (sentinel.exitcode or 0) < 0:
        # The sentinel was killed, not its workers: they are handing their turns back,
        # which the sweep after this must see.
        _wait_for_orphans(stopping, deadline)
        return True
    return stopping.hand_back


def _wait_for_orphans(stopping: Stopping, deadline: float) -> None:
    while (left := stopping.workers_alive()) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        logger.error("worker %s did not hand its turns back; killing it", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def request_stop(cluster: q_cluster.Cluster, stopping: Stopping) -> None:
    """Tell the cluster to stop; safe in a signal handler, and more than once."""
    stopping.request()
    if cluster.stop_event is not None and not stopping.told_sentinel:
        stopping.told_sentinel = True
        # Not here: a multiprocessing event's `set` waits for its waiter, the sentinel, to
        # wake, forever if a signal to the whole group has just killed it.
        threading.Thread(target=cluster.stop_event.set, daemon=True).start()


def _descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (Linux's /proc; none found elsewhere)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as children:
                for child in children.read().split():
                    found += [int(child), *_descendants(int(child))]
        except OSError:
            continue
    return found
