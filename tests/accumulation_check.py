"""Train runs that differ only in how their global batch is made (one batch, accumulated micro-batches, one or two
replicas) in one process, and say how far each run's weights end from its reference's.

Run by tests/test_gradient_accumulation.py as `python accumulation_check.py SPEC.json`: SPEC holds "runs", each
{"name", "reference" (another run's name, or null), "settings" (mlm_tpu.train_model's keywords, train_dataset and
output_dir among them)}, run in order. The CPU is split into 2 logical devices first, so runs of 1 and 2 replicas
share the process (and its one TensorFlow start-up); at most one run of 2 replicas per process (a second
MirroredStrategy over the same devices in one process can meet the first one's collective keys). Prints one JSON line: each compared run's largest absolute
weight difference from its reference, over every weight file the run saved (an ELECTRA's generator/ too).
"""

import json
import re
import sys
from pathlib import Path

import h5py
import numpy as np


def weights(folder: Path) -> dict:
    """Every weight the run saved, by its file and name (the model's numbered Keras scope made the same in each)."""
    found = {}
    for path in sorted(folder.rglob("tf_model.h5")):
        where = path.parent.relative_to(folder)

        def keep(name, item):
            if isinstance(item, h5py.Dataset):
                found[f"{where}/{re.sub(r'_[0-9]+/', '/', name)}"] = item[()]

        with h5py.File(path, "r") as stream:
            stream.visititems(keep)
    return found


def main(spec_path: str) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import mlm_tpu

    spec = json.loads(Path(spec_path).read_text())
    trained, differences = {}, {}
    for run in spec["runs"]:
        settings = dict(run["settings"])
        mlm_tpu.train_model(settings.pop("train_dataset"), settings.pop("output_dir"), **settings)
        trained[run["name"]] = found = weights(Path(run["settings"]["output_dir"]))
        if run["reference"]:
            expected = trained[run["reference"]]
            assert expected.keys() == found.keys() and len(found) > 10, (sorted(expected), sorted(found))
            differences[run["name"]] = max(float(np.max(np.abs(found[name] - expected[name]))) for name in found)
    print(json.dumps(differences))


if __name__ == "__main__":
    main(*sys.argv[1:])
