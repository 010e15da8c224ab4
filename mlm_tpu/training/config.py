"""The typed configs of the commands that run models: a training run (`python train.py`), an evaluation
(`python -m mlm_tpu.evaluate`), and the hardware both run on. No TensorFlow here: flags are checked
before it loads.

The defaults here are the only defaults. A run writes its config to `training_args.json` in its
output folder, and `python train.py --config <that file>` replays (or resumes) exactly that run;
`configs/` holds the README's runs written the same way.
"""

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

from mlm_tpu.configuration import setting

MAX_SEED = 2**31 - 1
OPTIMIZERS = ("adamw", "adafactor")  # --optimizer (training/optimizers.py)
SCHEDULES = ("linear", "rsqrt")  # --lr-schedule


@dataclass
class HardwareConfig:
    """The flags that say where a command runs; shared by training and evaluation."""

    tpu: Optional[str] = setting(None, changes_result=False)  # "local": this TPU VM (or Colab's); else a node's name
    tpu_zone: Optional[str] = setting(None, changes_result=False)
    gcp_project: Optional[str] = setting(None, changes_result=False)
    bf16: Optional[bool] = None  # bfloat16 mixed precision (None: on exactly on TPUs)
    cpu_replicas: int = setting(1, low=1, high=64, changes_result=False)  # split the CPU into replicas (Mirrored...)
    # TensorFlow's deterministic kernels (None: on, except on TPUs)
    deterministic: Optional[bool] = setting(None, changes_result=False)
    communication: str = setting("auto", changes_result=False)  # several workers (TF_CONFIG): auto | ring | nccl
    # several workers: seconds to wait for all to start
    cluster_start_timeout: float = setting(300.0, low=1, changes_result=False)

    @property
    def wants_bf16(self) -> bool:
        return self.bf16 if self.bf16 is not None else self.tpu is not None

    @property
    def wants_determinism(self) -> bool:
        return self.deterministic if self.deterministic is not None else self.tpu is None



@dataclass
class TrainingConfig:
    """One training run: data, model, optimisation, output and hardware."""

    # folder (local or gs://) of training shards; several: a mixture of them (shards/mixture.py)
    train_dataset: Union[str, Tuple[str, ...]]
    # local folder: the model each epoch (or the best), backup/, logs/, training_args.json
    output_dir: str = setting(changes_result=False)
    task: str = "mlm"  # mlm | span-corruption | classification | generation (mlm_tpu.tasks)
    eval_dataset: Optional[str] = None  # folder of validation shards, scored each epoch
    tokenizer: Optional[str] = None  # the tokenizer the shards were made with
    # model
    model_config: Optional[str] = None  # train from scratch with this shape (a preset, a config.json, a Hub name)
    config_overrides: Optional[str] = None  # "name=value,..." changes to that shape, e.g. hidden_dropout_prob=0
    model_name_or_path: Optional[str] = None  # T5 tasks: start from these pretrained weights instead
    max_length: Optional[int] = setting(None, low=8)  # tokens per example (per input for T5); None: the shards'
    max_target_length: Optional[int] = setting(None, low=2)  # T5 text2text: tokens per target; None: the shards'
    # optimisation
    per_replica_batch_size: int = setting(8, low=1, changes_result=False)  # the global batch is what must not change
    num_epochs: int = setting(1, low=1)
    max_steps: Optional[int] = setting(None, low=1)  # stop after this many steps in all (None: the epochs)
    optimizer: str = "adamw"  # adamw | adafactor (training/optimizers.py)
    lr_schedule: str = "linear"  # linear (warm-up, then linear decay) | rsqrt (T5's inverse square root)
    # peak learning rate (None: 1e-4 for linear, 1/sqrt(warm-up steps) for rsqrt; a run records the value it used)
    learning_rate: Optional[float] = setting(None, low=0, low_open=True, high=10)
    # rsqrt: T5X's base_learning_rate B: the rate B / sqrt(max(step, warm-up)), whose peak --learning-rate records
    base_learning_rate: Optional[float] = setting(None, low=0, low_open=True, high=1000, changes_result=False)
    weight_decay_rate: float = setting(1e-3, low=0, high=1)  # AdamW's decoupled weight decay (Adafactor has none)
    adam_beta1: float = setting(0.9, low=0, high=1, high_open=True)  # AdamW's first-moment decay
    adam_beta2: float = setting(0.999, low=0, high=1, high_open=True)  # AdamW's second-moment decay
    adam_epsilon: float = setting(1e-8, low=0, low_open=True)  # AdamW's epsilon, added to sqrt(second moment)
    warmup_ratio: float = setting(0.05, low=0, high=1)  # share of the steps warming up (linear)
    warmup_steps: Optional[int] = setting(None, low=0)  # warm-up steps (None: linear, the ratio's; rsqrt, 10,000)
    seed: int = setting(42, low=0, high=MAX_SEED)  # weights, data order, masks, spans, dropout
    shuffle_buffer_size: int = setting(2**18, low=1)  # records shuffled together, across the input pipelines
    input_pipelines: Optional[int] = setting(None, low=1)  # virtual input pipelines the data order is defined over
    pack: bool = False  # text-to-text: several examples per row (shards/text2text_packing.py)
    # several --train-dataset folders: each one's share, or ("examples",) for shares proportional to their sizes
    mixture_rates: Optional[Tuple[Union[float, str], ...]] = None
    mixture_temperature: float = setting(1.0, low=0, low_open=True)  # with "examples": sizes ** (1 / T)
    mixture_maximum: Optional[int] = setting(None, low=1)  # with "examples": a member counts as at most K examples
    # task settings
    mlm_probability: Optional[float] = setting(None, low=0, high=1, low_open=True, high_open=True)  # mlm (0.15)
    # mlm: the head at every position (not only the masked ones): the same loss, computed as before; free on resuming
    dense_mlm_head: bool = setting(False, changes_result=False)
    # mlm, the sparse head: prediction slots per row (None: enough for all but 1e-6 of rows, mlm/prediction_slots.py)
    max_predictions_per_seq: Optional[int] = setting(None, low=1)
    labels: Optional[Tuple[str, ...]] = None  # classification: the class names (None: the shards' targets)
    max_new_tokens: Optional[int] = setting(None, low=1)  # generation: tokens generated in validation
    metric_for_best_model: Optional[str] = None  # T5 tasks: the validation score whose best epoch is kept
    # delta-tuning (mlm_tpu/delta): train a small delta on a frozen --model-name-or-path, saved as PEFT saves it
    delta: Optional[str] = None  # lora | ia3 | prompt | prefix | adapter (None: every weight trains)
    lora_rank: int = setting(8, low=1)  # LoRA: the rank r of B·A
    lora_alpha: float = setting(16.0, low=0, low_open=True)  # LoRA: the update is scaled by alpha / r
    lora_dropout: float = setting(0.0, low=0, high=1, high_open=True)  # LoRA: dropout on the LoRA path's input
    lora_targets: Optional[Tuple[str, ...]] = None  # LoRA: module names (None: PEFT's for the model type)
    use_rslora: bool = False  # LoRA: scale by alpha / sqrt(r) (rank-stabilized LoRA)
    ia3_targets: Optional[Tuple[str, ...]] = None  # IA3: module names (None: PEFT's for the model type)
    num_virtual_tokens: int = setting(20, low=1)  # prompt and prefix tuning: virtual tokens
    adapter_kind: str = "pfeiffer"  # bottleneck adapters: pfeiffer (after the feed-forward) | houlsby (also attention)
    adapter_reduction: int = setting(16, low=1)  # bottleneck adapters: hidden size / bottleneck size
    # the training loop and its outputs
    steps_per_execution: int = setting(1, low=1, changes_result=False)  # steps per call into the device (TPUs: 100s)
    # compile each replica's training step with XLA (None: on with GPUs, off on CPUs; TPUs always compile)
    jit_compile: Optional[bool] = setting(None, changes_result=False)
    backup_steps: Optional[int] = setting(None, low=1, changes_result=False)  # backup every N steps (None: epochs)
    logging_steps: Optional[int] = setting(None, low=1, changes_result=False)  # log the loss every N steps
    # the peak TFLOP/s of each replica's device, for MFU in the logs (None: the table's, training/throughput.py)
    peak_tflops: Optional[float] = setting(None, low=0, low_open=True, changes_result=False)
    hub_model_id: Optional[str] = setting(None, changes_result=False)  # push the output folder here each epoch
    # resume even where a setting that decides the result differs from the backup's (recorded in training_args.json)
    allow_changed_settings: bool = setting(False, changes_result=False)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)

    def __post_init__(self):
        if isinstance(self.train_dataset, (tuple, list)) and len(self.train_dataset) == 1:
            self.train_dataset = self.train_dataset[0]  # one folder is written as before: a string

    @property
    def train_datasets(self) -> Tuple[str, ...]:
        return (self.train_dataset,) if isinstance(self.train_dataset, str) else tuple(self.train_dataset)


@dataclass
class EvaluationConfig:
    """What `python -m mlm_tpu.evaluate` does; the flags of the same names fill it."""

    model: str  # the trained model: train.py's --output-dir, a save_pretrained folder or a Hub name
    eval_dataset: str  # folder (local or gs://) of shards to evaluate on
    base_model: Optional[str] = None  # an adapter folder's base (None: its adapter_config.json's)
    max_length: Optional[int] = setting(None, low=8)  # checked against the shards (None: what they hold)
    per_replica_batch_size: int = setting(8, low=1, changes_result=False)  # the global batch is what must not change  # masks depend on it: compare runs made with the same
    mlm_probability: Optional[float] = setting(None, low=0, high=1, low_open=True, high_open=True)  # mlm (0.15)
    seed: int = setting(42, low=0, high=MAX_SEED)  # of the masks (or spans)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
