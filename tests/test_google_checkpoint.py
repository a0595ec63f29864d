"""Original google-research/bert and /albert TF1 checkpoints.

No such checkpoint is reachable here, so the tests write TF1 checkpoints themselves: the real
MiniLM weights under Google's BERT names (outputs must equal the Hugging Face path's), and
random weights under ALBERT's names (every tensor must land in its variable).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bertlayers.convert import CheckpointMismatchError
from bertlayers.families.albert import load_google_albert
from bertlayers.families.bert import load_google_bert, load_huggingface_bert
from bertlayers.utils.assets import minilm_path

rng = np.random.default_rng(0)


def save_tf1_checkpoint(tensors, prefix):
    """Write `tensors` {name: array} as a TF1 checkpoint (graph-mode Saver, as BERT's code did).
    The values are fed, not held in the graph as constants: the .meta file the Saver writes holds
    the graph, and a graph holding MiniLM's weights took 7 s a checkpoint to build and write."""
    with tf.Graph().as_default():
        fed = {name: tf.compat.v1.placeholder(value.dtype, value.shape) for name, value in tensors.items()}
        variables = {name: tf.compat.v1.Variable(fed[name], name=name) for name in tensors}
        saver = tf.compat.v1.train.Saver(var_list=variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer(), {fed[k]: v for k, v in tensors.items()})
            saver.save(session, prefix)


def google_names_from_minilm():
    from safetensors.numpy import load_file

    hf = load_file(os.path.join(minilm_path(), "model.safetensors"))
    config = json.load(open(os.path.join(minilm_path(), "config.json")))
    out = {
        "bert/embeddings/word_embeddings": hf["embeddings.word_embeddings.weight"],
        "bert/embeddings/token_type_embeddings": hf["embeddings.token_type_embeddings.weight"],
        "bert/embeddings/position_embeddings": hf["embeddings.position_embeddings.weight"],
        "bert/embeddings/LayerNorm/gamma": hf["embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": hf["embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": hf["pooler.dense.weight"].T,
        "bert/pooler/dense/bias": hf["pooler.dense.bias"],
    }
    for i in range(config["num_hidden_layers"]):
        g, h = f"bert/encoder/layer_{i}/", f"encoder.layer.{i}."
        pairs = {
            "attention/self/query": "attention.self.query",
            "attention/self/key": "attention.self.key",
            "attention/self/value": "attention.self.value",
            "attention/output/dense": "attention.output.dense",
            "intermediate/dense": "intermediate.dense",
            "output/dense": "output.dense",
        }
        for google, hugging in pairs.items():
            out[g + google + "/kernel"] = hf[h + hugging + ".weight"].T  # TF kernels are [in, out]
            out[g + google + "/bias"] = hf[h + hugging + ".bias"]
        for google, hugging in {
            "attention/output/LayerNorm": "attention.output.LayerNorm",
            "output/LayerNorm": "output.LayerNorm",
        }.items():
            out[g + google + "/gamma"] = hf[h + hugging + ".weight"]
            out[g + google + "/beta"] = hf[h + hugging + ".bias"]
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    heads = {
        "cls/predictions/transform/dense/kernel": rng.normal(size=(hidden, hidden)),
        "cls/predictions/transform/dense/bias": rng.normal(size=(hidden,)),
        "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=(hidden,)),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(size=(hidden,)),
        "cls/predictions/output_bias": rng.normal(size=(vocab,)),
        "cls/seq_relationship/output_weights": rng.normal(size=(2, hidden)),
        "cls/seq_relationship/output_bias": rng.normal(size=(2,)),
    }
    out.update({k: v.astype("float32") for k, v in heads.items()})
    return out, config


@pytest.fixture(scope="module")
def google_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("google")
    tensors, config = google_names_from_minilm()
    # Training state a real checkpoint carries: must be skipped without complaint.
    tensors["bert/pooler/dense/kernel/adam_m"] = np.zeros_like(tensors["bert/pooler/dense/kernel"])
    tensors["global_step"] = np.array(1000, "int64")
    save_tf1_checkpoint(tensors, str(folder / "bert_model.ckpt"))
    bert_config = {
        k: config[k]
        for k in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "hidden_act",
            "hidden_dropout_prob",
            "attention_probs_dropout_prob",
            "max_position_embeddings",
            "type_vocab_size",
            "initializer_range",
        )
    }
    (folder / "bert_config.json").write_text(json.dumps(bert_config))
    return str(folder / "bert_model.ckpt"), str(folder / "bert_config.json"), tensors


def test_google_bert_checkpoint_matches_the_hugging_face_path(google_checkpoint):
    prefix, config, tensors = google_checkpoint
    pretrainer = load_google_bert(prefix, config)
    reference = load_huggingface_bert(minilm_path())
    reference_inputs = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "minilm_reference.npz"))
    inputs = {k: reference_inputs[f"pair_{k}"] for k in ("token_ids", "segment_ids", "padding_mask")}
    ours, theirs = pretrainer.encoder(inputs), reference(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(ours[key], theirs[key], atol=1e-6)
    head = pretrainer.lm_head
    np.testing.assert_array_equal(head.output_bias, tensors["cls/predictions/output_bias"])
    np.testing.assert_array_equal(head.transform_dense.kernel, tensors["cls/predictions/transform/dense/kernel"])
    np.testing.assert_array_equal(
        pretrainer.next_sentence_head.output_dense.kernel, tensors["cls/seq_relationship/output_weights"].T
    )
    assert head.token_embedding is pretrainer.encoder.token_embedding


def test_mismatches_are_listed(google_checkpoint, tmp_path):
    prefix, config_path, tensors = google_checkpoint
    config = json.load(open(config_path))
    wrong = tmp_path / "bert_config.json"
    wrong.write_text(json.dumps({**config, "vocab_size": 30000}))
    with pytest.raises(CheckpointMismatchError) as error:
        load_google_bert(prefix, str(wrong))
    message = str(error.value)
    assert "bert/embeddings/word_embeddings: checkpoint shape (30522, 384)" in message
    assert "cls/predictions/output_bias: checkpoint shape (30522,)" in message

    partial = {
        k: v for k, v in tensors.items() if not k.startswith("cls/") and k != "bert/encoder/layer_2/output/dense/bias"
    }
    partial["bert/encoder/layer_9/output/dense/bias"] = np.zeros(384, "float32")  # an unexpected extra
    save_tf1_checkpoint(partial, str(tmp_path / "partial.ckpt"))
    with pytest.raises(
        CheckpointMismatchError, match=r"Missing from the checkpoint \(8\):\n  bert/encoder/layer_2/output/dense/bias"
    ):
        load_google_bert(str(tmp_path / "partial.ckpt"), config_path)
    del partial["bert/encoder/layer_9/output/dense/bias"]
    partial["bert/encoder/layer_2/output/dense/bias"] = tensors["bert/encoder/layer_2/output/dense/bias"]
    partial["bert/encoder/layer_9/output/dense/bias"] = np.zeros(384, "float32")
    save_tf1_checkpoint(partial, str(tmp_path / "encoder_only.ckpt"))
    with pytest.warns(
        UserWarning, match=r"1 tensors of .* are not used by the model: bert/encoder/layer_9/output/dense/bias"
    ):
        encoder = load_google_bert(str(tmp_path / "encoder_only.ckpt"), config_path, pretrainer=False)
    assert encoder.config.num_layers == 6
    with pytest.raises(ValueError, match="Cannot read a TF checkpoint at"):
        load_google_bert(str(tmp_path / "missing.ckpt"), config_path)


def test_google_albert_names_on_random_weights(tmp_path):
    E, H, I, V, L = 16, 32, 64, 100, 3
    tensors = {
        "bert/embeddings/word_embeddings": rng.normal(size=(V, E)),
        "bert/embeddings/token_type_embeddings": rng.normal(size=(2, E)),
        "bert/embeddings/position_embeddings": rng.normal(size=(64, E)),
        "bert/embeddings/LayerNorm/gamma": rng.normal(size=(E,)),
        "bert/embeddings/LayerNorm/beta": rng.normal(size=(E,)),
        "bert/encoder/embedding_hidden_mapping_in/kernel": rng.normal(size=(E, H)),
        "bert/encoder/embedding_hidden_mapping_in/bias": rng.normal(size=(H,)),
        "bert/pooler/dense/kernel": rng.normal(size=(H, H)),
        "bert/pooler/dense/bias": rng.normal(size=(H,)),
        "cls/predictions/transform/dense/kernel": rng.normal(size=(H, E)),
        "cls/predictions/transform/dense/bias": rng.normal(size=(E,)),
        "cls/predictions/transform/LayerNorm/gamma": rng.normal(size=(E,)),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(size=(E,)),
        "cls/predictions/output_bias": rng.normal(size=(V,)),
        "cls/seq_relationship/output_weights": rng.normal(size=(2, H)),
        "cls/seq_relationship/output_bias": rng.normal(size=(2,)),
    }
    group = "bert/encoder/transformer/group_0/inner_group_0/"
    for name in ("query", "key", "value"):
        tensors[f"{group}attention_1/self/{name}/kernel"] = rng.normal(size=(H, H))
        tensors[f"{group}attention_1/self/{name}/bias"] = rng.normal(size=(H,))
    tensors[f"{group}attention_1/output/dense/kernel"] = rng.normal(size=(H, H))
    tensors[f"{group}attention_1/output/dense/bias"] = rng.normal(size=(H,))
    tensors[f"{group}ffn_1/intermediate/dense/kernel"] = rng.normal(size=(H, I))
    tensors[f"{group}ffn_1/intermediate/dense/bias"] = rng.normal(size=(I,))
    tensors[f"{group}ffn_1/intermediate/output/dense/kernel"] = rng.normal(size=(I, H))
    tensors[f"{group}ffn_1/intermediate/output/dense/bias"] = rng.normal(size=(H,))
    for norm in ("LayerNorm", "LayerNorm_1"):
        tensors[f"{group}{norm}/gamma"] = rng.normal(size=(H,))
        tensors[f"{group}{norm}/beta"] = rng.normal(size=(H,))
    tensors = {k: v.astype("float32") for k, v in tensors.items()}
    save_tf1_checkpoint(tensors, str(tmp_path / "model.ckpt"))
    (tmp_path / "albert_config.json").write_text(
        json.dumps(
            {
                "vocab_size": V,
                "embedding_size": E,
                "hidden_size": H,
                "num_hidden_layers": L,
                "num_hidden_groups": 1,
                "num_attention_heads": 4,
                "intermediate_size": I,
                "inner_group_num": 1,
                "hidden_act": "gelu",
                "max_position_embeddings": 64,
                "type_vocab_size": 2,
            }
        )
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every tensor must be used
        pretrainer = load_google_albert(str(tmp_path / "model.ckpt"), str(tmp_path / "albert_config.json"))
    encoder = pretrainer.encoder
    assert len(encoder.transformer_layers) == 1 and encoder.config.num_layers == L
    block = encoder.transformer_layers[0]
    np.testing.assert_array_equal(block.output_dense.kernel, tensors[f"{group}ffn_1/intermediate/output/dense/kernel"])
    np.testing.assert_array_equal(block.attention_layer_norm.gamma, tensors[f"{group}LayerNorm/gamma"])
    np.testing.assert_array_equal(block.output_layer_norm.gamma, tensors[f"{group}LayerNorm_1/gamma"])
    np.testing.assert_array_equal(
        np.asarray(block.attention_layer.query_dense.kernel).reshape(H, H),
        tensors[f"{group}attention_1/self/query/kernel"],
    )
    np.testing.assert_array_equal(
        encoder.embeddings.embedding_projection.kernel, tensors["bert/encoder/embedding_hidden_mapping_in/kernel"]
    )
    outputs = pretrainer(
        {
            "token_ids": np.array([[2, 5, 7, 3]], "int32"),
            "segment_ids": np.zeros((1, 4), "int32"),
            "padding_mask": np.ones((1, 4), "int32"),
            "masked_positions": np.array([[1, 2]], "int32"),
        }
    )
    assert outputs["mlm"].shape == (1, 2, V) and np.all(np.isfinite(outputs["mlm"]))
