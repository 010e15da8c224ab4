"""Stop requests: SIGTERM (what a preempted VM gets), and with several workers SIGINT, asks a run to stop at the
next step it can, with a backup, and exit with STOPPED_EXIT_CODE (errors.py). One process alone and every worker
of a cluster alike: with several, all of them learn of a request at the same step, so their backups agree."""

import signal
import threading
from typing import Optional

from mlm_tpu.console import log
from mlm_tpu.errors import Stopped
from mlm_tpu.training.multi_worker import Worker


class StopRequests:
    """SIGTERM (and, with several workers, SIGINT) asks the run to stop at the next step it can: every worker
    learns of it at the same step (a one-number all-reduce after each execution), saves a backup there and stops."""

    def __init__(self, strategy, worker: Worker):
        import tensorflow as tf

        self.signal_name: Optional[str] = None
        self.worker = worker
        signals = [signal.SIGTERM] + ([signal.SIGINT] if worker.cluster else [])
        self.previous = {}  # the handlers to put back (signals reach only the main thread's handlers)
        if threading.current_thread() is threading.main_thread():
            self.previous = {number: signal.signal(number, self._on_signal) for number in signals}

        @tf.function
        def anyone(asked):
            return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(asked)), axis=None)

        self._anyone = anyone

    def __enter__(self) -> "StopRequests":
        return self

    def __exit__(self, *exception) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def _on_signal(self, number, frame) -> None:
        self.signal_name = signal.Signals(number).name
        log(f"{self.signal_name} received: stopping after this step, with a backup")

    def agreed(self) -> bool:
        """Whether any worker was asked to stop (all workers call this at the same steps)."""
        import tensorflow as tf

        if self.worker.cluster is None:
            return self.signal_name is not None
        return bool(self._anyone(tf.constant(self.signal_name is not None, tf.int32)).numpy())

    def stop(self, step: int) -> None:
        why = f"{self.signal_name} on {self.worker.name}" if self.signal_name else "another worker was sent a signal"
        raise Stopped(f"stopped at step {step} ({why}); the backup is written: run the same command again to "
                      "continue")
