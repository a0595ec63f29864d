"""Print how far bertlayers is from Hugging Face transformers: on the real MiniLM weights, and
on the small random ELECTRA checkpoints transformers wrote into tests/fixtures/electra_tiny/.

Compares `load_huggingface_bert(all-MiniLM-L6-v2)` against the outputs transformers' BertModel
recorded in tests/fixtures/minilm_reference.npz (see tests/fixtures/record_minilm_reference.py),
in float32 and, for information, under mixed_bfloat16. Padded positions' outputs are
meaningless to users but are compared too ("all positions").

    python examples/parity_report.py
"""

import os

import numpy as np

from bertlayers.convert import load_huggingface_bert, load_huggingface_electra
from bertlayers.data import minilm_path

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
FIXTURE = os.path.join(FIXTURES, "minilm_reference.npz")
INPUTS = ("token_ids", "segment_ids", "padding_mask")


def main():
    reference = np.load(FIXTURE)
    print(f"reference: transformers {reference['transformers_version']} BertModel, {os.path.normpath(FIXTURE)}")
    for dtype in ("float32", "mixed_bfloat16"):
        encoder = load_huggingface_bert(minilm_path(), dtype=dtype)
        for batch in ("single", "pair"):
            inputs = {key: reference[f"{batch}_{key}"] for key in INPUTS}
            outputs = encoder(inputs)
            real = inputs["padding_mask"].astype(bool)
            sequence_delta = np.abs(np.asarray(outputs["sequence_output"], "float32") - reference[f"{batch}_sequence_output"])
            pooled_delta = np.abs(np.asarray(outputs["pooled_output"], "float32") - reference[f"{batch}_pooled_output"])
            print(
                f"{dtype:15s} {batch:6s} batch {inputs['token_ids'].shape}: max|Δ| sequence_output "
                f"{sequence_delta[real].max():.2e} at real tokens, {sequence_delta.max():.2e} at all "
                f"positions; pooled_output {pooled_delta.max():.2e}"
            )

    electra = np.load(os.path.join(FIXTURES, "electra_reference.npz"))
    inputs = {key: electra[key] for key in INPUTS}
    real = inputs["padding_mask"].astype(bool)
    print(f"reference: transformers {electra['transformers_version']} ElectraForPreTraining / ElectraForMaskedLM "
          f"(E=24, H=32 and 16, padded pairs {inputs['token_ids'].shape})")
    for role, output, key in (("discriminator", "sequence_output", "hidden"), ("discriminator", "rtd", "logits"),
                              ("generator", "mlm", "logits")):
        model = load_huggingface_electra(os.path.join(FIXTURES, "electra_tiny", role))
        delta = np.abs(np.asarray(model(inputs)[output]) - electra[f"{role}_{key}"])
        print(f"float32         electra {role:13s} {output:15s}: max|Δ| {delta[real].max():.2e} at real tokens")


if __name__ == "__main__":
    main()
