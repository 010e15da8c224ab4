"""The training stage, shared by every task: typed configs (config.py), the loop (trainer.py), the task
interface (task.py), hardware (strategy, precision, determinism), backups, step-keyed dropout, validation and
evaluation over shards (evaluation.py), inspection.py (a split's examples as the model gets them), TensorBoard
logs and the loss plot. The task a run trains is a plug-in handed in by the command (mlm_tpu/tasks.py)."""
