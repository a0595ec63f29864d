"""bertlayers on the real all-MiniLM-L6-v2 weights against Hugging Face transformers.

The reference outputs in fixtures/minilm_reference.npz were recorded by transformers'
`BertModel` itself with tests/fixtures/record_minilm_reference.py (rerunnable; see its
docstring), so the comparison is against code this project did not write.
"""

import json
import os
import shutil

import numpy as np
import pytest

from bertlayers.convert import CheckpointMismatchError
from bertlayers.families.bert import load_huggingface_bert
from bertlayers.utils.assets import minilm_path

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "minilm_reference.npz")
INPUTS = ("token_ids", "segment_ids", "padding_mask")


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURE)


@pytest.fixture(scope="module")
def minilm():
    return load_huggingface_bert(minilm_path())


def batch(reference, name):
    return {key: reference[f"{name}_{key}"] for key in INPUTS}


@pytest.mark.parametrize("name", ["single", "pair"])
def test_matches_transformers(reference, minilm, name):
    # `make test` runs this test under JAX too: the real weights, both backends, one reference.
    inputs = batch(reference, name)
    outputs = minilm(inputs)
    # At real tokens; what transformers computes at padding is read by nothing (our padding rows
    # are zeros: the blocks skip them).
    real = inputs["padding_mask"].astype(bool)
    for key, ours, theirs in (
        ("sequence_output", np.asarray(outputs["sequence_output"])[real], reference[f"{name}_sequence_output"][real]),
        ("pooled_output", np.asarray(outputs["pooled_output"]), reference[f"{name}_pooled_output"]),
    ):
        delta = np.abs(ours - theirs).max()
        assert delta <= 1e-5, f"{name} {key}: max |delta| {delta}"
    assert not np.asarray(outputs["sequence_output"])[~real].any()


def test_pair_batch_is_padded_and_uses_both_segments(reference):
    inputs = batch(reference, "pair")
    assert (inputs["padding_mask"] == 0).any() and (inputs["segment_ids"] == 1).any()


def test_real_weights_padding_invariance(reference, minilm):
    inputs = batch(reference, "pair")
    extra = 9
    longer = {key: np.pad(value, ((0, 0), (0, extra))) for key, value in inputs.items()}
    short, long = minilm(inputs), minilm(longer)
    mask = inputs["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(long["sequence_output"])[:, : mask.shape[1]][mask],
        np.asarray(short["sequence_output"])[mask],
        atol=1e-5,
    )
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_config_is_read_from_the_checkpoint(minilm):
    config = minilm.config
    assert (config.num_layers, config.hidden_size, config.num_heads, config.intermediate_size) == (6, 384, 12, 1536)
    assert config.layer_norm_epsilon == 1e-12 and config.activation == "gelu"


# --- Bad checkpoints --------------------------------------------------------------------------


def copy_checkpoint(tmp_path, tensors=None, config_changes=None, vocab_lines=None):
    """A copy of the MiniLM folder with its tensors, config or vocabulary edited."""
    from safetensors.numpy import load_file, save_file

    source = minilm_path()
    target = tmp_path / "ckpt"
    target.mkdir()
    with open(os.path.join(source, "config.json")) as f:
        config = json.load(f)
    config.update(config_changes or {})
    (target / "config.json").write_text(json.dumps(config))
    if vocab_lines is None:
        shutil.copy(os.path.join(source, "vocab.txt"), target / "vocab.txt")
    else:
        (target / "vocab.txt").write_text("\n".join(vocab_lines) + "\n")
    weights = load_file(os.path.join(source, "model.safetensors"))
    save_file(tensors(weights) if tensors else weights, str(target / "model.safetensors"))
    return str(target)


def test_missing_and_mismatched_tensors_are_listed(tmp_path):
    def edit(weights):
        del weights["encoder.layer.3.output.dense.bias"]
        weights["pooler.dense.weight"] = weights["pooler.dense.weight"][:, :10]
        return weights

    with pytest.raises(CheckpointMismatchError) as error:
        load_huggingface_bert(copy_checkpoint(tmp_path, tensors=edit))
    message = str(error.value)
    assert "Missing from the checkpoint (1):\n  encoder.layer.3.output.dense.bias" in message
    assert "pooler.dense.weight: checkpoint shape (384, 10)" in message


def test_config_that_disagrees_with_the_weights(tmp_path):
    with pytest.raises(CheckpointMismatchError, match=r"Shape mismatches \(\d+\)"):
        load_huggingface_bert(copy_checkpoint(tmp_path, config_changes={"intermediate_size": 1024}))


def test_vocabulary_that_does_not_belong_to_the_checkpoint(tmp_path):
    from bertlayers.convert import load_checkpoint

    folder = copy_checkpoint(tmp_path, vocab_lines=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s"])
    with pytest.raises(ValueError, match="vocab.txt has 7 entries but .* says vocab_size 30522"):
        load_huggingface_bert(folder)
    with pytest.raises(ValueError, match="the wordpiece tokenizer has 7 tokens but config.json says vocab_size 30522"):
        load_checkpoint(folder)
    (tmp_path / "special_only").mkdir()
    special = copy_checkpoint(tmp_path / "special_only", vocab_lines=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    with pytest.raises(ValueError, match="no WordPiece tokenizer can be built from its 5 tokens"):
        load_checkpoint(special)


def test_unexpected_tensors_are_reported(tmp_path):
    def edit(weights):
        weights = {f"bert.{key}": value for key, value in weights.items()}
        weights["cls.predictions.bias"] = np.zeros((30522,), "float32")
        return weights

    with pytest.warns(UserWarning, match=r"1 tensors of .* are not used by the model: cls.predictions.bias"):
        encoder = load_huggingface_bert(copy_checkpoint(tmp_path, tensors=edit))
    assert encoder.config.num_layers == 6


def test_corrupt_weights_file(tmp_path):
    path = copy_checkpoint(tmp_path)
    with open(os.path.join(path, "model.safetensors"), "r+b") as f:
        f.truncate(1000)
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        load_huggingface_bert(path)


def test_unsupported_model_type(tmp_path):
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported"):
        load_huggingface_bert(copy_checkpoint(tmp_path, config_changes={"model_type": "gpt2"}))
    # A supported model_type of another family names the loader that reads it.
    shutil.rmtree(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="model_type 'roberta' is not a bert checkpoint; use load_huggingface_roberta"):
        load_huggingface_bert(copy_checkpoint(tmp_path, config_changes={"model_type": "roberta"}))


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        load_huggingface_bert(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="has no model.safetensors. It has pytorch_model.bin"):
        load_huggingface_bert(str(tmp_path))


def test_load_checkpoint_reads_each_tokenizer_file_once(monkeypatch):
    """The folder's tokenizer files (vocab.txt, tokenizer.json, tokenizer_config.json) are read once,
    and the checkpoint's tokenizer, the one recorded on its encoder and the BERT loader's count of
    vocab.txt's lines against config.json's vocab_size all come from that read."""
    import builtins
    import collections

    from bertlayers.convert import load_checkpoint, recorded_tokenizer
    from bertlayers.tokenizers import ModelTokenizer

    folder, opened, real_open = os.path.realpath(minilm_path()), collections.Counter(), builtins.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.dirname(os.path.realpath(file)) == folder:
            opened[os.path.basename(file)] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    checkpoint = load_checkpoint(minilm_path())
    monkeypatch.undo()
    tokenizer_files = {
        name: count for name, count in opened.items() if name not in ("config.json", "model.safetensors")
    }
    assert tokenizer_files == {"vocab.txt": 1, "tokenizer.json": 1, "tokenizer_config.json": 1}
    recorded = recorded_tokenizer(checkpoint.encoder)
    assert recorded == ModelTokenizer.from_folder(minilm_path()) and recorded.source == minilm_path()
    assert checkpoint.tokenizer.vocabulary_size == len(recorded.tokens) == 30522
