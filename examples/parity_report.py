"""Print how far bertlayers is from Hugging Face transformers: on the real MiniLM weights, and
on the small random ELECTRA, XLNet, RoBERTa, XLM-R, ALBERT and DistilBERT checkpoints (tied and
untied LM heads) transformers wrote into tests/fixtures/.

Compares `load_huggingface_bert(all-MiniLM-L6-v2)` against the outputs transformers' BertModel
recorded in tests/fixtures/minilm_reference.npz (see tests/fixtures/record_minilm_reference.py),
in float32 and, for information, under mixed_bfloat16; then the random-init checkpoints of every
other family (tests/fixtures/subword_families/, modern_families/ and deberta_v2/): hidden states and LM or class
logits. Only real tokens are compared: at padding bertlayers outputs zeros where transformers
computes states nobody reads.

    python examples/parity_report.py
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)
import numpy as np

from bertlayers.families.bert import load_huggingface_bert
from bertlayers.families.electra import load_huggingface_electra
from bertlayers.families.xlnet import XLNetEncoder, load_huggingface_xlnet
from bertlayers.utils.assets import minilm_path
from bertlayers.utils.cli import argument_parser, run_script

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
FIXTURE = os.path.join(FIXTURES, "minilm_reference.npz")
INPUTS = ("token_ids", "segment_ids", "padding_mask")


def main():
    argument_parser(__doc__).parse_args()
    reference = np.load(FIXTURE)
    print(f"reference: transformers {reference['transformers_version']} BertModel, {os.path.normpath(FIXTURE)}")
    for dtype in ("float32", "mixed_bfloat16"):
        encoder = load_huggingface_bert(minilm_path(), dtype=dtype)
        for batch in ("single", "pair"):
            inputs = {key: reference[f"{batch}_{key}"] for key in INPUTS}
            outputs = encoder(inputs)
            real = inputs["padding_mask"].astype(bool)
            sequence_delta = np.abs(
                np.asarray(outputs["sequence_output"], "float32") - reference[f"{batch}_sequence_output"]
            )
            pooled_delta = np.abs(np.asarray(outputs["pooled_output"], "float32") - reference[f"{batch}_pooled_output"])
            print(
                f"{dtype:15s} {batch:6s} batch {inputs['token_ids'].shape}: max|Δ| sequence_output "
                f"{sequence_delta[real].max():.2e} at real tokens; pooled_output {pooled_delta.max():.2e}"
            )

    electra = np.load(os.path.join(FIXTURES, "electra_reference.npz"))
    inputs = {key: electra[key] for key in INPUTS}
    real = inputs["padding_mask"].astype(bool)
    print(
        f"reference: transformers {electra['transformers_version']} ElectraForPreTraining / ElectraForMaskedLM "
        f"(E=24, H=32 and 16, padded pairs {inputs['token_ids'].shape})"
    )
    for role, output, key in (
        ("discriminator", "sequence_output", "hidden"),
        ("discriminator", "rtd", "logits"),
        ("generator", "mlm", "logits"),
    ):
        model = load_huggingface_electra(os.path.join(FIXTURES, "electra_tiny", role))
        delta = np.abs(np.asarray(model(inputs)[output]) - electra[f"{role}_{key}"])
        print(f"float32         electra {role:13s} {output:15s}: max|Δ| {delta[real].max():.2e} at real tokens")
    xlnet_report()
    families_report("subword_families")
    families_report("modern_families")
    families_report("deberta_v2")


def xlnet_report():
    xlnet = np.load(os.path.join(FIXTURES, "xlnet_reference.npz"))
    inputs = {key: xlnet[key] for key in INPUTS}
    print(
        f"reference: transformers {xlnet['transformers_version']} XLNetModel / XLNetLMHeadModel "
        f"(H=32, padding on either side, segments 0/1/2, {inputs['token_ids'].shape}); every position"
    )
    pretrainer = load_huggingface_xlnet(os.path.join(FIXTURES, "xlnet_tiny"))
    encoder = pretrainer.encoder

    def report(what, ours, key):
        print(f"float32         xlnet {what:38s}: max|Δ| {np.abs(np.asarray(ours) - xlnet[key]).max():.2e}")

    report("content stream", encoder(inputs)["sequence_output"], "content")
    perm = {"perm_mask": xlnet["perm_mask"], "target_mapping": xlnet["target_mapping"]}
    report("two-stream logits (perm_mask, target_mapping)", pretrainer({**inputs, **perm})["plm"], "logits")
    with_memory = XLNetEncoder.from_config({**encoder.get_config(), "mem_len": 6})
    with_memory.set_weights(encoder.get_weights())
    empty = np.zeros(xlnet["memory"].shape[:2] + (0,) + xlnet["memory"].shape[3:], "float32")
    first = with_memory({**inputs, "memory": empty})
    second = with_memory({**inputs, "memory": np.asarray(first["memory"])})
    report("memory after segment 1 (mem_len 6)", first["memory"], "memory")
    report("segment 2 attending to it", second["sequence_output"], "second_content")
    report("memory after segment 2", second["memory"], "second_memory")
    clamped = XLNetEncoder.from_config({**encoder.get_config(), "clamp_len": 3})
    clamped.set_weights(encoder.get_weights())
    report("content stream, clamp_len 3", clamped(inputs)["sequence_output"], "clamped_content")


def families_report(fixtures):
    """Each random-init folder of tests/fixtures/<fixtures>/ against the outputs transformers recorded."""
    reference = np.load(os.path.join(FIXTURES, f"{fixtures}.npz"))
    print(
        f"reference: transformers {reference['transformers_version']} *ForMaskedLM / *ForSequenceClassification "
        f"(padded batches), tests/fixtures/{fixtures}/; real tokens"
    )
    for name in sorted({key.split(".")[0] for key in reference.files if "." in key}):
        folder = os.path.join(FIXTURES, fixtures, name)
        inputs = {key: reference[f"{name}.{key}"] for key in INPUTS}
        real = inputs["padding_mask"].astype(bool)
        model = load_checkpoint_model(folder)
        encoder = model.encoder
        content = encoder(inputs)["sequence_output"]
        if "classifier" in name:  # a sequence classifier: its class logits, one row a sequence
            logits, real_rows = model(inputs)["logits"], np.ones(len(real), bool)
        elif hasattr(model, "generator_head"):  # ELECTRA's generator: every position
            logits, real_rows = model(inputs)["mlm"], real
        elif name.startswith("xlnet"):  # transformers projects the content stream through lm_loss
            logits, real_rows = model.lm_head(content), real
        else:
            positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(real), 1))
            logits, real_rows = model({**inputs, "masked_positions": positions})["mlm"], real
        hidden = np.abs(np.asarray(content) - reference[f"{name}.hidden"])[real].max()
        lm = np.abs(np.asarray(logits) - reference[f"{name}.logits"])[real_rows].max()
        what = "class logits" if "classifier" in name else "LM logits"
        tied = "tied" if encoder.config.tie_word_embeddings else "untied"
        print(f"float32         {name:26s} ({tied:6s}) last_hidden_state max|Δ| {hidden:.2e}, {what} {lm:.2e}")


def load_checkpoint_model(folder):
    """The folder's model through its model_type's registered loader."""
    import json

    from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES

    with open(os.path.join(folder, "config.json")) as f:
        return HUGGINGFACE_FAMILIES[json.load(f)["model_type"]].loader(folder)


if __name__ == "__main__":
    run_script(main)
