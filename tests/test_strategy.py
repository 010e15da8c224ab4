"""Strategy choice: TPU (through a fake resolver: no TPU can run here), GPUs, the CPU."""

import tensorflow as tf
import pytest

from mlm_tpu.training import hardware as strategy_module
from mlm_tpu.errors import UserError


class FakeResolver:
    """Records how it was made; stands in for TPUClusterResolver."""

    made = []

    def __init__(self, tpu=None, zone=None, project=None):
        FakeResolver.made.append({"tpu": tpu, "zone": zone, "project": project})


@pytest.fixture
def fake_tpu(monkeypatch):
    calls = []
    FakeResolver.made = []
    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", FakeResolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("initialize", r)))
    monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: ("TPUStrategy", r))
    return calls


def test_tpu_branch_connects_initialises_then_builds_a_tpu_strategy(fake_tpu, monkeypatch):
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    chosen = strategy_module.select_strategy("my-tpu", "us-central2-b", "my-project")
    resolver = chosen[1]
    assert chosen[0] == "TPUStrategy"
    assert FakeResolver.made == [{"tpu": "my-tpu", "zone": "us-central2-b", "project": "my-project"}]
    assert fake_tpu == [("connect", resolver), ("initialize", resolver)]


def test_bare_tpu_means_this_tpu_vm_or_colab(fake_tpu, monkeypatch):
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    strategy_module.select_strategy(strategy_module.LOCAL_TPU)
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    strategy_module.select_strategy(strategy_module.LOCAL_TPU)
    assert FakeResolver.made == [{"tpu": "local", "zone": None, "project": None},
                                 {"tpu": None, "zone": None, "project": None}]


def test_a_tpu_that_fails_to_initialise_is_a_user_error(fake_tpu, monkeypatch):
    def fail(resolver):
        raise tf.errors.NotFoundError(None, None, "TPUs not found in the cluster. More detail")

    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", fail)
    with pytest.raises(UserError, match=r"no TPU found named 'gone' \(TPUs not found in the cluster\)"):
        strategy_module.select_strategy("gone")


def test_gpus_get_a_mirrored_strategy(monkeypatch):
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["/physical_device:GPU:0", "/physical_device:GPU:1"] if kind == "GPU" else [])
    monkeypatch.setattr(tf.distribute, "MirroredStrategy", lambda *args: ("MirroredStrategy", args))
    assert strategy_module.select_strategy() == ("MirroredStrategy", ())


def test_the_cpu_alone_gets_the_default_strategy():
    chosen = strategy_module.select_strategy()
    assert chosen is tf.distribute.get_strategy() and chosen.num_replicas_in_sync == 1
    assert "default strategy" in strategy_module.describe(chosen)
