"""The training stage, shared by every task: typed configs (config.py), the loop (trainer.py), the task
interface (task.py), hardware (strategy, precision, determinism), backups, step-keyed dropout, validation and
evaluation over shards (evaluation.py), TensorBoard logs and the loss plot."""
