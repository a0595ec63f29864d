"""Static masked-LM masking (chosen once, written to TFRecords), as in google-research/bert.

Three ways to choose what to mask, over the non-special tokens of an example:
  - "token": individual WordPieces (BERT's original).
  - "whole_word": all WordPieces of a word together (BERT's whole-word masking).
  - "span": SpanBERT's contiguous spans of whole words, span lengths in words drawn from
    Geometric(p) clipped at `max_span_length`.
  - "entity", "phrase": ERNIE's named entities and phrases together, other words whole: the
    units `masking_units` marks in the text (its `JoinedPiece`s), chosen as whole words are.
Of the chosen tokens, `mask_token_rate` (80%) become [MASK], `random_token_rate` (10%) a
random token, and the rest stay unchanged, drawn per token for every strategy: BERT's
whole-word masking does so, and so does SpanBERT's code (its default `word_piece`
replacement redraws per token), although the SpanBERT paper describes one draw per span.
"""

import dataclasses

import numpy as np

from bertlayers.pretraining_data.masking_units import UNIT_STRATEGIES, JoinedPiece

STRATEGIES = ("token", "whole_word", "span", *UNIT_STRATEGIES)


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    strategy: str = "token"
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    span_geometric_p: float = 0.2
    max_span_length: int = 10

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"MaskingConfig.strategy must be one of {STRATEGIES}, got {self.strategy!r}.")
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"MaskingConfig.masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}.")
        if self.max_predictions_per_seq <= 0:
            raise ValueError("MaskingConfig.max_predictions_per_seq must be > 0.")
        if self.mask_token_rate + self.random_token_rate > 1.0:
            raise ValueError("MaskingConfig.mask_token_rate + random_token_rate must be <= 1.")
        if not 0.0 < self.span_geometric_p <= 1.0 or self.max_span_length < 1:
            raise ValueError("MaskingConfig: span_geometric_p must be in (0, 1] and max_span_length >= 1.")


@dataclasses.dataclass
class MaskedExample:
    """token_ids with masks applied, and what the model must predict.

    positions are sorted; labels are the original ids there; spans (span strategy only) are
    (first_position, last_position, length_in_words, drawn_length) tuples: drawn_length is the
    length sampled from the clipped geometric law, length_in_words what fit in the budget.
    """

    token_ids: list
    positions: list
    labels: list
    spans: list


def clipped_geometric_pmf(p, max_length):
    """P(length = k) for k = 1..max_length: Geometric(p) with the tail mass put on max_length."""
    k = np.arange(1, max_length + 1)
    pmf = p * (1 - p) ** (k - 1)
    pmf[-1] = (1 - p) ** (max_length - 1)
    return pmf


def word_groups(token_ids, vocab, by_word):
    """Lists of positions to mask together (by word: a word's pieces, and an entity's or phrase's
    `JoinedPiece`s with the piece before); special tokens never appear."""
    never = set(vocab.never_masked_ids)
    groups = []
    for position, token in enumerate(token_ids):
        if token in never:
            continue
        joined = vocab.is_continuation[token] or isinstance(token, JoinedPiece)
        continues = by_word and joined and groups and groups[-1][-1] == position - 1
        if continues:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def _choose_groups(groups, budget, rng):
    """BERT's choice: shuffled groups, skipping any that would overshoot the budget."""
    chosen, count = [], 0
    for index in rng.permutation(len(groups)):
        if count >= budget:
            break
        group = groups[index]
        if count + len(group) > budget:
            continue
        chosen.append(group)
        count += len(group)
    return chosen


def _choose_spans(words, budget, config, rng):
    """SpanBERT's choice: spans of whole words until the token budget is met.

    Each length is drawn independently from the clipped geometric law; the start is then
    uniform over the starts where the span fits without overlapping an earlier one. The last
    span may be shortened to fit the budget, as SpanBERT's is.

    Returns:
      (start_word, length_in_words, drawn_length) per span.
    """
    pmf = clipped_geometric_pmf(config.span_geometric_p, config.max_span_length)
    taken = np.zeros(len(words), bool)
    sizes = np.array([len(w) for w in words])
    spans, count = [], 0
    for _ in range(10 * budget + 10):
        if count >= budget:
            break
        length = int(rng.choice(len(pmf), p=pmf)) + 1
        starts = [s for s in range(len(words) - length + 1) if not taken[s : s + length].any()]
        if not starts:
            continue
        start = starts[rng.integers(len(starts))]
        drawn = length
        while length and count + sizes[start : start + length].sum() > budget:
            length -= 1
        if not length:
            break
        taken[start : start + length] = True
        count += int(sizes[start : start + length].sum())
        spans.append((start, length, drawn))
        if length < drawn:
            break
    return spans


def mask_example(token_ids, vocab, config, rng):
    """Choose and apply masks to one packed example.

    Args:
      token_ids: list of ids, `[CLS] ... [SEP] (... [SEP])`, unpadded.
      vocab: a `VocabularyInfo`.
      config: a `MaskingConfig`.
      rng: a `numpy.random.Generator`.

    Returns:
      A `MaskedExample`.
    """
    token_ids = list(token_ids)
    groups = word_groups(token_ids, vocab, by_word=config.strategy != "token")
    maskable = sum(len(g) for g in groups)
    budget = min(config.max_predictions_per_seq, max(1, int(round(maskable * config.masked_lm_prob))))

    if config.strategy == "span":
        span_choices = _choose_spans(groups, budget, config, rng)
        units = [[p for w in groups[s : s + n] for p in w] for s, n, _ in span_choices]
        spans = [(u[0], u[-1], n, t) for u, (_, n, t) in zip(units, span_choices)]
    else:
        units = _choose_groups(groups, budget, rng)
        spans = []

    output = list(token_ids)
    for position in (p for unit in units for p in unit):
        draw = rng.random()
        if draw < config.mask_token_rate:
            output[position] = vocab.mask_id
        elif draw < config.mask_token_rate + config.random_token_rate:
            output[position] = int(vocab.replacement_ids[rng.integers(len(vocab.replacement_ids))])
    positions = sorted(p for unit in units for p in unit)
    return MaskedExample(
        token_ids=[int(t) for t in output],
        positions=positions,
        labels=[int(token_ids[p]) for p in positions],
        spans=spans,
    )
