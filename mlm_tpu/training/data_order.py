"""Which data order a run trains with: the number V of virtual input pipelines (shards/layout.py), the one thing
besides the seed, the shards and the global batch that decides which examples each step sees.

A new run takes --input-pipelines, or else the default for its global batch and shards (never a function of the
machines). A resumed run takes the V its backup was written with, so it continues exactly on any number of workers
that V allows; --input-pipelines may repeat it, not change it.

Until the pipelines read equal parts of the records (reading.ShardSet.share), pipeline v read every V-th shard from
the v-th, and an epoch was as long as the smallest such group allowed. With V = 1 both are the one pipeline reading
every shard: such a backup continues. A backup of V > 1 from then had another order: it is refused in one line.

Backups written before V existed (mlm_tpu 0.3.0 and earlier) carry no V. Their order was one input pipeline per
host, whose batches went to the replicas in turn, each masked by its own batch number. With one process and one
replica that is exactly the order of V = 1 (one pipeline reading every shard, one batch per step, masks keyed by
(seed, step)), and dropout is drawn alike: such a backup resumes with V = 1 and says so. Any other old backup
(several replicas) had an order that V cannot express: it is refused, in one line that says what to do.
"""

import os
from typing import Optional

from mlm_tpu.console import log
from mlm_tpu.errors import UserError
from mlm_tpu.jsonfiles import read_json
from mlm_tpu.output_dir import RUN_INFO_FILE
from mlm_tpu.shards.layout import BatchLayout, default_input_pipelines

STATE_KEY = "input_pipelines"  # the V a backup was written with, in its loop state
SHARES_KEY, SHARES = "pipeline_shares", "equal parts of the records"  # what each of the V pipelines reads


def choose_layout(given: Optional[int], backup_state: Optional[dict], output_dir: str, shards: int,
                  global_batch_size: int, hosts: int, replicas: int, accumulation: int = 1) -> BatchLayout:
    """The run's batch layout, checked (one line if it cannot be); `backup_state` is the loop state of the backup
    the run resumes from, None for a new run."""
    recorded = backup_state.get(STATE_KEY) if backup_state is not None else None
    if backup_state is not None and recorded is None:
        recorded = _order_of_old_backup(output_dir, hosts, replicas)
    if recorded and recorded > 1 and backup_state.get(SHARES_KEY) != SHARES:
        raise UserError(f"the backup in {output_dir} was written by an earlier mlm_tpu, whose {recorded} input "
                        f"pipelines each read one shard in {recorded} (unequal shards cost examples every epoch); "
                        "this version gives each an equal part of the records, a different order, so it cannot "
                        "continue that run exactly: finish it with the version that wrote it, or delete "
                        f"{os.path.join(output_dir, 'backup')} to start over")
    if recorded is not None and given is not None and given != recorded:
        raise UserError(f"--input-pipelines {given}: the backup in {output_dir} was written with --input-pipelines "
                        f"{recorded}, and the data order depends on it; drop the flag to continue the run, or give "
                        "another --output-dir for a new one")
    pipelines = recorded or given or default_input_pipelines(global_batch_size, shards)
    layout = BatchLayout(pipelines, global_batch_size, hosts, replicas, accumulation)
    layout.check(shards, flag_given=bool(recorded or given))
    return layout


def _order_of_old_backup(output_dir: str, hosts: int, replicas: int) -> int:
    """V = 1 for a backup written by one replica before V existed, resumed by one replica; else one line."""
    info_path = os.path.join(output_dir, RUN_INFO_FILE)
    info = read_json(info_path, "the run's settings", "delete it to start over") if os.path.isfile(info_path) else {}
    written_by = (info.get("run") or {}).get("replicas") if isinstance(info, dict) else None
    if written_by == 1 and hosts == 1 and replicas == 1:
        log("The backup was written before the data order had input pipelines; with one replica that order is the "
            "one of --input-pipelines 1, which this run keeps")
        return 1
    raise UserError(f"the backup in {output_dir} was written by mlm_tpu 0.3.0 or earlier, "
                    f"{f'by {written_by} replicas, ' if written_by and written_by > 1 else ''}whose data order "
                    "depended on the number of replicas: this version continues such a backup only as one process "
                    "with one replica, as it was written; finish it with that version, or delete "
                    f"{os.path.join(output_dir, 'backup')} to start over")
