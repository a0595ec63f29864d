"""ELMo vectors served from text (`bertlayers.export.elmo_vectors.export_elmo`): in a process without Keras, the
SavedModel's words are `bilm_words`'s and its layers the Keras biLM's on Python's character ids."""

from pathlib import Path

import numpy as np
from fresh_serving import run_fresh

from bertlayers.export.elmo_vectors import export_elmo
from bertlayers.families.elmo import BidirectionalLanguageModel, batch_character_ids, bilm_words

TEXTS = [
    "Actresses (Catalan: Actrius) is a 1997 Catalan language Spanish drama film by Ventura Pons.",
    "In order to prepare herself, young actress (Mercè Pons) interviews them, 1935–1936.",
    "Rowling's state-of-the-art novel wasn't sold in the U.S. until\u00a0later;\tnaïve cafe\u0301 🙂 東京",
    "x" * 60 + " short",
    "",
]


def python_inputs(texts):
    sentences = [bilm_words(t) for t in texts]
    return sentences, batch_character_ids(sentences)


def test_served_text_gives_the_keras_bilms_layers(tmp_path):
    bilm = BidirectionalLanguageModel(
        40, filters=((1, 4), (2, 4)), character_embedding=4, units=8, projection_units=5, dropout=0.0
    )
    encoder = bilm.finished_encoder()
    final = export_elmo(encoder, str(tmp_path / "models"), name="elmo")
    assert (Path(final) / "batching_params.pbtxt").is_file()  # sentences: TF Serving batches them
    assert final.endswith("elmo/1") and (tmp_path / "models" / "models.config").exists()
    served = run_fresh(final, "serving_default", {"text": np.array([t.encode() for t in TEXTS])}, tmp_path, text=False)
    sentences, inputs = python_inputs(TEXTS)
    expected = np.asarray(encoder(inputs)["layers"])
    for row, words in enumerate(sentences):
        n = len(words) + 2
        assert [w.decode() for w in served["words"][row][:n]] == ["<S>", *words, "</S>"], row
        assert served["padding_mask"][row].sum() == n
        np.testing.assert_allclose(served["layers"][row, :, :n], expected[row, :, :n], atol=1e-5)
        np.testing.assert_allclose(served["elmo"][row, :n], expected[row, :, :n].mean(0), atol=1e-5)
    assert export_elmo(encoder, str(tmp_path / "models"), name="elmo").endswith("elmo/2")  # never replaced
