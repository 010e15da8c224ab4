"""The training stage, shared by every task: typed configs (config.py), a run assembled (trainer.py, from
checks.py, input.py and step.py) and its loop (loop.py), the task interface (task.py), hardware (strategy,
precision, determinism), several workers (cluster.py, multi_worker.py, stops.py), backups, step-keyed dropout,
validation and evaluation over shards (evaluation.py), inspection.py (a split's examples as the model gets them),
TensorBoard logs and the loss plot. The task a run trains is a plug-in handed in by the command (mlm_tpu/tasks.py)."""
