"""A (query, document) pair as one prompted text, the way LLM rerankers read it: a fixed prefix,
the pair formatted into one text (an instruction beside it), a fixed suffix before the answer.

    prompt = PairPrompt(prefix, "<Query>: {query}\\n<Document>: {document}", suffix)
    texts = prompt.texts(queries, documents)          # Python strings, for training and `predict`
    texts = prompt.graph_texts(queries, documents)    # the same strings as graph ops, in a served model
    layout = prompt.layout(checkpoint_tokenizer)       # prefix ids, the text, suffix ids

The prefix and suffix are tokenized on their own and kept whole; a text too long for the row is
cut from its end (Qwen3-Reranker's model card). Families register theirs by model_type
(`register_reranker_prompt`), with the answer pieces the reranker's score compares.
"""

import dataclasses

from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

_FIELDS = ("{query}", "{document}")


@dataclasses.dataclass(frozen=True)
class PairPrompt:
    """How a reranker's prompt wraps a (query, document) pair.

    Attributes:
      prefix: the text before the pair (special tokens such as `<|im_start|>` as their text).
      pair: the pair's text, `{query}` and then `{document}` each once, `{instruction}` optionally.
      suffix: the text after the pair, up to where the model answers.
      instruction: what `{instruction}` in `pair` becomes.
    """

    prefix: str
    pair: str
    suffix: str
    instruction: str = ""

    def __post_init__(self):
        counts = [self.pair.count(field) for field in _FIELDS]
        if counts != [1, 1] or self.pair.index("{query}") > self.pair.index("{document}"):
            raise ValueError(
                f"PairPrompt.pair must hold {{query}} and then {{document}}, each once; got {self.pair!r}."
            )

    def _parts(self):
        """The pair's text around its two fields: (before the query, between, after the document)."""
        text = self.pair.replace("{instruction}", self.instruction)
        before, rest = text.split("{query}")
        between, after = rest.split("{document}")
        return before, between, after

    def texts(self, queries, documents) -> list[str]:
        """The pairs' texts (what sits between the prefix and the suffix)."""
        before, between, after = self._parts()
        return [before + query + between + document + after for query, document in zip(queries, documents)]

    def graph_texts(self, queries, documents):
        """`texts` of string tensors `[batch]`, as graph ops."""
        before, between, after = self._parts()
        return tf.strings.join([before, queries, between, documents, after])

    def layout(self, checkpoint_tokenizer):
        """`checkpoint_tokenizer`'s input layout with the prefix's ids first and the suffix's last,
        nothing between (each row one text)."""
        ids = checkpoint_tokenizer.tokenize(tf.constant([self.prefix, self.suffix]))
        prefix, suffix = (row.numpy().tolist() for row in ids)
        return dataclasses.replace(checkpoint_tokenizer.layout, start=prefix, between=(), end=suffix, end_segments=None)

    def with_instruction(self, instruction: str | None) -> "PairPrompt":
        """This prompt with another instruction (None: this one)."""
        return self if instruction is None else dataclasses.replace(self, instruction=str(instruction))


@dataclasses.dataclass(frozen=True)
class RerankerPrompt:
    """A family's LLM reranker: its prompt and the answer pieces its score compares
    (the positive's probability against the negative's at the last token)."""

    prompt: PairPrompt
    answers: tuple = ("yes", "no")


# model_type -> RerankerPrompt; each family's module adds its own on import.
RERANKER_PROMPTS = {}


def register_reranker_prompt(model_type: str, prompt: PairPrompt, answers: tuple = ("yes", "no")) -> None:
    """Make `TextReranker.from_checkpoint` read a causal-LM folder of `model_type` as an LLM reranker."""
    RERANKER_PROMPTS[model_type] = RerankerPrompt(prompt, tuple(answers))


__all__ = ["PairPrompt", "RerankerPrompt", "register_reranker_prompt", "RERANKER_PROMPTS"]
