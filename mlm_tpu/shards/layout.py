"""How each step's global batch is made, and who reads what: the rule that makes a run's data order the same
whatever the number of worker processes, replicas or TPU hosts that train it.

A run's data order is defined over V *virtual* input pipelines (--input-pipelines; training_args.json records it).
Virtual pipeline v reads the v-th of V equal parts of the records (the shards one after the other in name order:
reading.ShardSet.share, so uneven shards cost no examples), in its own order drawn from (seed, v), and gives each
step G / V examples, rows [v G/V, (v+1) G/V) of the global batch of G, masked (or span-corrupted) from
(seed + v, step).
Nothing there depends on the machines. A machine's input pipeline (one per worker process, or per TPU host: P of
them, TensorFlow's `num_input_pipelines`) runs V / P of the virtual ones, consecutive ones, and hands their rows in
order to its R / P replicas, so replica r always trains rows [r G/R, (r+1) G/R) of the same global batch. Dropout is
drawn per virtual pipeline too (training/dropout.py). What differs between topologies is only the order in which
floating-point sums over replicas are added up.

So: V divides G, V is at most the number of shards (each virtual pipeline reads about its own), P divides V (each
machine runs whole virtual pipelines), and R divides V or V divides R (each replica's rows are whole virtual
pipelines' rows, or a whole part of one's). With --gradient-accumulation-steps N each replica's rows are trained as N
micro-batches, and the same holds for them: R x N divides V or V divides R x N. No TensorFlow here: the checks run
before it loads.
"""

from dataclasses import dataclass
from typing import List

from mlm_tpu.errors import UserError

DEFAULT_INPUT_PIPELINES = 64  # most virtual pipelines a run gets without --input-pipelines


def divisors(number: int) -> List[int]:
    return [d for d in range(1, number + 1) if number % d == 0]


def default_input_pipelines(global_batch_size: int, shards: int) -> int:
    """The largest divisor of the global batch that is at most DEFAULT_INPUT_PIPELINES and the number of shards:
    a function of the run's data and batch alone, never of the machines."""
    return max(d for d in divisors(global_batch_size) if d <= min(DEFAULT_INPUT_PIPELINES, shards))


@dataclass(frozen=True)
class BatchLayout:
    """V virtual pipelines making a global batch of G rows, read by P machine pipelines (hosts) for R replicas."""

    input_pipelines: int  # V
    global_batch_size: int  # G
    hosts: int  # P: worker processes (MultiWorkerMirroredStrategy) or TPU hosts; 1 otherwise
    replicas: int  # R, all hosts together
    accumulation: int = 1  # N: each replica's rows of a step trained as N micro-batches (--gradient-accumulation-steps)

    @property
    def rows_per_pipeline(self) -> int:
        return self.global_batch_size // self.input_pipelines

    @property
    def rows_per_replica(self) -> int:
        return self.global_batch_size // self.replicas

    @property
    def micro_batches(self) -> int:
        """The blocks of rows a step's global batch is trained as, each replica's N micro-batches: R x N."""
        return self.replicas * self.accumulation

    @property
    def rows_per_micro_batch(self) -> int:
        return self.global_batch_size // self.micro_batches

    @property
    def pipelines_per_host(self) -> int:
        return self.input_pipelines // self.hosts

    @property
    def replicas_per_host(self) -> int:
        return self.replicas // self.hosts

    def pipelines_of_host(self, host: int) -> range:
        return range(host * self.pipelines_per_host, (host + 1) * self.pipelines_per_host)

    def check(self, shards: int, flag_given: bool) -> None:
        """One line if this layout cannot be: too few shards, a batch the pipelines do not divide, machines or
        replicas that would split a virtual pipeline unevenly."""
        v, g, p, r = self.input_pipelines, self.global_batch_size, self.hosts, self.replicas
        batch = f"the global batch of {g} ({g // r} per replica x {r} replica(s))"
        where = f"--input-pipelines {v}" if flag_given else f"{v} input pipelines (the default for {batch} and " \
                                                            f"{shards} shard(s))"
        if shards < p:
            raise UserError(f"--train-dataset has {shards} shard(s), fewer than the {p} workers (or TPU hosts): each "
                            f"reads its own shards; re-shard into at least {p} (a smaller --shard-size)")
        if v > shards:
            raise UserError(f"{where}: --train-dataset has only {shards} shard(s), and each input pipeline reads its "
                            f"own; use --input-pipelines {self.suggestion(shards)} or re-shard into more shards")
        if g % v:
            raise UserError(f"{where} does not divide {batch}: every pipeline gives each step the same number of "
                            f"examples; use --input-pipelines {self.suggestion(shards)}")
        if v % p:
            raise UserError(f"{where} cannot be shared by the {p} workers (or TPU hosts): each runs the same number of "
                            f"them; use --input-pipelines {self.suggestion(shards)}")
        if v % r and r % v:
            raise UserError(f"{where} cannot be split evenly among {r} replicas (one must divide the other); use "
                            f"--input-pipelines {self.suggestion(shards)}")
        m = self.micro_batches
        if v % m and m % v:  # dropout is drawn per pipeline's rows (training/dropout.py), so a micro-batch holds whole
            # pipelines' rows or a part of one pipeline's
            raise UserError(f"{where} cannot be split evenly into the {m} micro-batches of {g // m} rows of "
                            f"--gradient-accumulation-steps {self.accumulation} on {r} replica(s) (one must divide "
                            f"the other); use --input-pipelines {self.suggestion(shards)}")

    def suggestion(self, shards: int) -> int:
        """The largest V that fits this batch, these shards and these machines."""
        fitting = [d for d in divisors(self.global_batch_size) if d <= min(DEFAULT_INPUT_PIPELINES, shards)
                   and d % self.hosts == 0 and all(d % blocks == 0 or blocks % d == 0
                                                   for blocks in (self.replicas, self.micro_batches))]
        return max(fitting, default=self.hosts)
