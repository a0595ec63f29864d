"""XLNet's pretraining recipe: whole-word targets chosen in the records, order and masks drawn per batch."""

import functools

from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.families.xlnet.encoder import XLNetEncoder
from bertlayers.families.xlnet.permutation_lm import choose_plm_targets, factorization_masks, xlnet_layout
from bertlayers.families.xlnet.pretrainer import XLNetPretrainer
from bertlayers.pretraining_data.objectives import DataObjective, normalized_weights
from bertlayers.startup import require_tensorflow
from bertlayers.utils.validation import NON_NEGATIVE_INT, Range

tf = require_tensorflow(__name__)

TARGET_FEATURE = "plm_targets"  # 0/1 per position of the record: XLNet's `is_masked`


def _target_features(sequence_length, max_predictions_per_seq):
    return {TARGET_FEATURE: sequence_length}


def _record_targets(masked_example, token_ids, context):
    return {TARGET_FEATURE: choose_plm_targets(token_ids, context.vocab, context.max_predictions_per_seq, context.rng)}


def _plm_batch(features, seed, context, perm_size):
    vocab = context.vocab
    padding_mask = features["input_mask"]
    token_ids, segment_ids, is_target = xlnet_layout(
        features["input_ids"], features["segment_ids"], padding_mask, features[TARGET_FEATURE], vocab.cls_id
    )
    length = tf.shape(token_ids)[1]
    perm_mask, positions, weights = factorization_masks(
        token_ids,
        padding_mask,
        is_target,
        (vocab.sep_id, vocab.cls_id),
        seed,
        perm_size or length,
        context.masking.max_predictions_per_seq,
    )
    x = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "perm_mask": perm_mask,  # [B, S, S]
        "target_mapping": tf.one_hot(positions, length) * weights[:, :, tf.newaxis],  # [B, T, S]
    }
    labels = tf.gather(token_ids, positions, batch_dims=1)  # [B, T]
    return x, {"plm": labels}, {"plm": normalized_weights(weights)}


def plm_objective(options):
    """XLNet's data: pairs (the next-sentence label is unused), targets chosen when records
    are written, order and masks drawn per batch (`perm_size` 0: the whole sequence)."""
    return DataObjective(
        examples="nsp",
        masking=None,
        batch_inputs=functools.partial(_plm_batch, perm_size=options["perm_size"]),
        extra_features=_target_features,
        record_extras=_record_targets,
    )


def xlnet_config(config):
    """A preset's sizes as an XLNet encoder (segment 2 for [CLS])."""
    return config.replace(architecture="xlnet", type_vocab_size=3)


def build_pretrainer(encoder_config, dtype, options):
    encoder = XLNetEncoder.from_encoder_config(
        encoder_config, clamp_len=options["clamp_len"], dtype=dtype, name="encoder"
    )
    return XLNetPretrainer(encoder)


RECIPE = register_recipe(
    Recipe(
        "xlnet",
        "permutation language modeling with two-stream relative attention (Yang et al. 2019)",
        plm_objective,
        build_pretrainer,
        loss_key="plm_loss",
        encoder_config=xlnet_config,
        options={
            "perm_size": Option(0, NON_NEGATIVE_INT, "tokens per permuted block; 0: the whole sequence"),
            "clamp_len": Option(-1, Range(int, -1), "relative distances beyond it share one encoding; -1: none"),
        },
        report=("plm_accuracy",),
        continues_checkpoint=False,  # two-stream attention; its checkpoints are SentencePiece
    )
)
