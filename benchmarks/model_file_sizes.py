"""The size of a fine-tuned model file, for serving (weights and config) and with the optimizer's state.

    python benchmarks/model_file_sizes.py

Builds what `run_classifier.py` saves (the real all-MiniLM-L6-v2 with a two-class head, AdamW as
the runs create it), takes one training step so the optimizer has its state, and writes it both
ways: `bertlayers.convert.save_model` (what the runs write and export reads) and Keras's own
`model.save` (which keeps the optimizer's variables).
"""

import os
import tempfile

import numpy as np

from bertlayers.convert import load_encoder, save_model
from bertlayers.models import SequenceClassifier
from bertlayers.training.optimization import create_optimizer
from bertlayers.utils.assets import minilm_path


def main():
    model = SequenceClassifier(load_encoder(minilm_path()), 2)
    model.compile(
        optimizer=create_optimizer(1e-4, 10, 1, weight_decay=0.01, model=model), loss="sparse_categorical_crossentropy"
    )
    ids = np.full((2, 16), 1000, "int32")
    model.fit(
        {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)},
        {"logits": np.array([0, 1])},
        verbose=0,
    )
    with tempfile.TemporaryDirectory() as folder:
        serving, full = os.path.join(folder, "model.keras"), os.path.join(folder, "with_optimizer.keras")
        save_model(model, serving)
        model.save(full)
        for label, path in (("save_model (weights and config)", serving), ("model.save (with AdamW state)", full)):
            print(f"{label:42s} {os.path.getsize(path) / 1e6:7.1f} MB")


if __name__ == "__main__":
    main()
