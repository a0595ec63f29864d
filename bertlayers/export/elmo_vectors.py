"""ELMo vectors served from text: a SavedModel in TF Serving's layout whose graph splits the text
into words, turns each word into ELMo's character ids and runs the biLM (core TensorFlow ops only).

    text [B] --words (elmo.data.bilm_words's rule, RE2)--> <S> w_1 .. w_n </S>     [B, S] strings
         --bytes, markers--> character ids [B, S, 50] --biLM--> layers [B, L + 1, S, 2P]
    outputs: layers, elmo (their mean: ScalarMix before a task trains it), padding_mask, words

    export_elmo(bilm.finished_encoder(), "savedmodels", name="elmo")   # savedmodels/elmo/1/

(`bertlayers.families.elmo` builds the biLM; this module is the export tier's, above the families.)
"""

import os
import shutil

from bertlayers.export.serving_folder import (
    batch_in_tf_serving,
    check_model_name,
    check_serving_base,
    commit_together,
    next_version,
    write_models_config,
)
from bertlayers.families.elmo.characters import (
    BEGINNING_OF_WORD,
    END_OF_WORD,
    MAX_CHARACTERS,
    PADDING,
    SENTENCE_END,
    SENTENCE_START,
    character_ids,
)
from bertlayers.startup import require_tensorflow
from bertlayers.utils import atomic_files

tf = require_tensorflow(__name__)

# elmo.data's word rule in RE2: Python's Unicode \w is letters, numbers and "_"; RE2's \s is ASCII,
# so Unicode spaces (\pZ) are named too.
_WORD_CHARACTER = r"[\pL\pN_]"
_WORD = rf"({_WORD_CHARACTER}+(?:['’-]{_WORD_CHARACTER}+)*|[^\pL\pN_\s\pZ])"


def text_words(text):
    """Ragged `[B, (n)]` words of `text` `[B]` (`elmo.data.bilm_words`)."""
    spaced = tf.strings.regex_replace(text, r"[\s\pZ]+", " ")
    spaced = tf.strings.regex_replace(spaced, _WORD, r" \1 ")
    return tf.strings.split(tf.strings.strip(spaced), sep=None)


def word_character_ids(words):
    """ELMo's character ids `[N, 50]` of `words` `[N]` (`elmo.characters.character_ids`)."""
    room = MAX_CHARACTERS - 2
    cut = tf.strings.substr(words, 0, room, unit="BYTE")
    raw = tf.cast(tf.io.decode_raw(cut, tf.uint8, fixed_length=room), tf.int32)  # [N, 48], zero-padded
    length = tf.strings.length(cut, unit="BYTE")[:, None]  # [N, 1]
    position = tf.range(MAX_CHARACTERS)[None, :]  # [1, 50]
    byte = tf.pad(raw, [[0, 0], [1, 1]])  # byte p - 1 at position p
    ids = tf.where(position == 0, BEGINNING_OF_WORD, tf.where(position <= length, byte, PADDING))
    ids = tf.where(position == length + 1, END_OF_WORD, ids)
    return ids + 1


class ElmoServable(tf.Module):
    """The SavedModel's computation: text in, the biLM's layers and their mean out."""

    def __init__(self, encoder):
        super().__init__()
        object.__setattr__(self, "_encoder", encoder)  # its variables are tracked once, below
        self.encoder_variables = [v.value for v in encoder.variables]
        self.sentence_start = tf.constant(character_ids(SENTENCE_START))
        self.sentence_end = tf.constant(character_ids(SENTENCE_END))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def serve(self, text):
        words = text_words(text)  # [B, (n)]
        characters = tf.RaggedTensor.from_row_lengths(
            word_character_ids(words.flat_values), words.row_lengths()
        )  # [B, (n), 50]
        batch = tf.shape(text)[0]
        start = tf.RaggedTensor.from_row_lengths(
            tf.tile(self.sentence_start[None], [batch, 1]), tf.ones([batch], tf.int64)
        )
        end = tf.RaggedTensor.from_row_lengths(tf.tile(self.sentence_end[None], [batch, 1]), tf.ones([batch], tf.int64))
        sentences = tf.concat([start, characters, end], axis=1)  # [B, (n + 2), 50]
        character_ids_ = sentences.to_tensor(0)  # [B, S, 50]
        padding_mask = tf.sequence_mask(sentences.row_lengths(), tf.shape(character_ids_)[1], tf.int32)
        layers = self._encoder({"character_ids": character_ids_, "padding_mask": padding_mask}, training=False)[
            "layers"
        ]
        marked = tf.concat(
            [tf.fill([batch, 1], SENTENCE_START), words, tf.fill([batch, 1], SENTENCE_END)], axis=1
        ).to_tensor("")
        return {
            "layers": tf.cast(layers, tf.float32),  # [B, L + 1, S, 2P]
            "elmo": tf.reduce_mean(tf.cast(layers, tf.float32), axis=1),  # [B, S, 2P]
            "padding_mask": padding_mask,  # [B, S]
            "words": marked,  # [B, S], "" at padding
        }


def export_elmo(encoder, base_dir: str, name: str = "elmo", version: int | None = None) -> str:
    """Write `encoder` (a biLM's `finished_encoder()`) as `<base_dir>/<name>/<version>/` (the next
    version by default; an existing one is never replaced), list it in `<base_dir>/models.config`,
    and return the version folder. The folder appears complete or not at all."""
    check_model_name(name)
    check_serving_base(base_dir)
    version = next_version(os.path.join(base_dir, name)) if version is None else int(version)
    final = os.path.join(base_dir, name, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final} exists already; versions are never overwritten.")
    os.makedirs(os.path.dirname(final), exist_ok=True)
    staging = os.path.join(base_dir, name, atomic_files.staging_name(str(version)))
    servable = ElmoServable(encoder)
    try:
        tf.saved_model.save(servable, staging, signatures={"serving_default": servable.serve})
        batch_in_tf_serving(staging)  # it takes sentences, a string a row
        commit_together(base_dir, {staging: final})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    write_models_config(base_dir, names=[name])
    return final
