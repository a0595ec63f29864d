"""The served signatures: token ids in (`id_signatures`: every request checked, optional inputs
derived) and text in (`text_signatures`: tokenized in the graph in the checkpoint's layout; a
question and a context in for SQuAD, their answer out)."""

from bertlayers.export.request_checks import checked_id_request, checked_ranks, checked_text_request
from bertlayers.export.serving_outputs import ID_INPUTS
from bertlayers.export.task_decoders import best_span
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

# Every signature is traced without autograph (`autograph=False`): what they run is graph ops
# already (the checks, packing and decoding in tf ops, no Python branch on a tensor), and
# autograph's conversion of every function beneath them, source parsed and rewritten, was half an
# export's time (a ModernBERT text-and-ids export under cProfile: 9.5 of 20 s).


def id_signatures(servable, sequence_length, truncate, real_first=False):
    # Any length: the checks refuse (or cut, with `truncate`) what is past `sequence_length`.
    spec = lambda name: tf.TensorSpec([None, None], tf.int32, name=name)  # noqa: E731
    names = servable.input_names
    limits = servable.limits

    def prepare(token_ids, segment_ids=None, padding_mask=None):
        given = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        inputs = checked_id_request(
            {name: given[name] for name in names},
            sequence_length,
            limits.vocabulary_size,
            limits.type_vocab_size,
            truncate,
            real_first,
        )
        # The model runs at the request's own length (no padding to the exported one).
        return servable.run(inputs)

    serving_default = tf.function(
        lambda *tensors: prepare(**dict(zip(names, tensors))),
        input_signature=[spec(n) for n in names],
        autograph=False,
    )
    signatures = {"serving_default": serving_default}
    # TF Serving signatures have no optional inputs: these derive what is left out
    # (segment 0 everywhere; the mask from [PAD] = 0).
    if names != ["token_ids"]:

        @tf.function(input_signature=[spec("token_ids")], autograph=False)
        def token_ids_only(token_ids):
            token_ids = checked_ranks({"token_ids": token_ids}, 2, "[batch, sequence_length]")["token_ids"]
            return prepare(token_ids, tf.zeros_like(token_ids), tf.cast(tf.not_equal(token_ids, 0), tf.int32))

        signatures["token_ids_only"] = token_ids_only
    if names == list(ID_INPUTS):

        @tf.function(input_signature=[spec("token_ids"), spec("padding_mask")], autograph=False)
        def token_ids_and_mask(token_ids, padding_mask):
            token_ids = checked_ranks({"token_ids": token_ids}, 2, "[batch, sequence_length]")["token_ids"]
            return prepare(token_ids, tf.zeros_like(token_ids), padding_mask)

        signatures["token_ids_and_mask"] = token_ids_and_mask
    return signatures


def _strings(name):
    """A signature's input of one string a row."""
    return tf.TensorSpec([None], tf.string, name=name)


def text_signatures(servable, tokenizer, sequence_length, truncate):
    outputs_kind = servable.outputs

    def run_ids(token_ids, segment_ids, padding_mask, **extra):  # extra: the outputs' own inputs (span_mask, ...)
        given = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return servable.run({**{name: given[name] for name in servable.input_names}, **extra})

    if outputs_kind.text_kind == "question_context":
        return {
            "serving_default": _question_context_signature(run_ids, tokenizer, sequence_length, truncate, outputs_kind)
        }

    # One trace of the tokenizer for the signatures' four calls (the pair signature makes two).
    tokenize = tf.function(tokenizer.tokenize, input_signature=[_strings("texts")], autograph=False)

    def run(first, second, **extra):
        if outputs_kind.text_kind == "embedding":  # as `embed` calls it: one trace of the model for all
            extra.setdefault("prompt_length", tf.constant(0, tf.int32))
        token_ids, segment_ids, padding_mask = tokenizer.layout.pack(
            first, second, sequence_length, truncation=tokenizer.truncation, truncate=truncate
        )
        outputs = run_ids(token_ids, segment_ids, padding_mask, **extra)
        if outputs_kind.returns_pieces:
            outputs["token_ids"] = token_ids
        return outputs

    @tf.function(input_signature=[_strings("text")], autograph=False)
    def serving_default(texts):
        texts = checked_text_request({"text": texts})["text"]
        return run(tokenize(texts), None)

    @tf.function(input_signature=[_strings("text_a"), _strings("text_b")], autograph=False)
    def text_pair(text_a, text_b):
        checked = checked_text_request({"text_a": text_a, "text_b": text_b})
        text_a, text_b = checked["text_a"], checked["text_b"]
        if outputs_kind.text_kind == "prompted_pair":  # one prompted text a pair, in the prompt's layout
            return run(tokenize(outputs_kind.prompt.graph_texts(text_a, text_b)), None)
        return run(tokenize(text_a), tokenize(text_b))

    if outputs_kind.text_kind == "prompted_pair":  # a pair is what it reads: that is its default
        return {"serving_default": text_pair, "text_pair": text_pair}
    signatures = {"serving_default": serving_default, "text_pair": text_pair}
    if outputs_kind.text_kind == "embedding":
        output = outputs_kind.output

        @tf.function(
            input_signature=[
                _strings("text"),
                tf.TensorSpec([], tf.string, name="prompt_name"),
                tf.TensorSpec([], tf.int32, name="dimensions"),
            ],
            autograph=False,
        )
        def embed(texts, prompt_name, dimensions):
            texts = checked_text_request({"text": texts})["text"]
            prompted = tf.strings.join([outputs_kind.prompt_of(prompt_name), texts])
            prompt_length = outputs_kind.prompt_length_of(prompt_name)
            embedding = run(tokenize(prompted), None, prompt_length=prompt_length)[output]
            return {output: outputs_kind.truncated(embedding, dimensions)}

        signatures["embed"] = embed
    return signatures


def _question_context_signature(run_ids, tokenizer, sequence_length, truncate, outputs_kind):
    """The question-answering text signature: (question, context) strings in, the best span's
    text and character offsets out (decoded in the graph), with its score and the null answer's."""

    @tf.function(input_signature=[_strings("question"), _strings("context")], autograph=False)
    def serving_default(question, context):
        checked = checked_text_request({"question": question, "context": context})
        question, context = checked["question"], checked["context"]
        question_ids = tokenizer.tokenize(question)
        question_ids = question_ids[:, : outputs_kind.max_query_length]
        context_ids, starts, ends, starts_word, ends_word = tokenizer.tokenize_with_offsets(context)
        token_ids, segment_ids, padding_mask = tokenizer.layout.pack(
            question_ids, context_ids, sequence_length, truncation=tokenizer.truncation, truncate=truncate
        )
        # Context token k sits after the special tokens and the question.
        offset = (
            tf.cast(question_ids.row_lengths(), tf.int32) + len(tokenizer.layout.start) + len(tokenizer.layout.between)
        )

        def at_positions(flags):  # ragged [b, (context)] → [b, seq], False outside the context
            before = tf.ragged.range(tf.zeros_like(offset), offset) < 0
            return tf.concat([before, flags], axis=1).to_tensor(False, shape=tf.shape(token_ids))

        # The context's kept pieces (before the closing special tokens) and the null answer at 0.
        column = tf.range(tf.shape(token_ids)[1])[tf.newaxis, :]
        closing = tf.reduce_sum(padding_mask, axis=1, keepdims=True) - len(tokenizer.layout.end)
        context_mask = at_positions(tf.ones_like(starts_word)) & (column < closing)
        span_mask = tf.cast(context_mask | (column == 0), tf.int32)
        outputs = run_ids(token_ids, segment_ids, padding_mask, span_mask=span_mask)

        start, end, score, null_score = best_span(
            outputs["start_logits"],
            outputs["end_logits"],
            at_positions(starts_word),
            at_positions(ends_word),
            outputs_kind.max_answer_length,
        )
        first, last = start - offset, end - offset
        start_byte = tf.gather(starts, tf.maximum(first, 0), batch_dims=1)
        end_byte = tf.gather(ends, tf.maximum(last, 0), batch_dims=1)
        start_byte, end_byte = tf.cast(start_byte, tf.int32), tf.cast(end_byte, tf.int32)
        answer = tf.strings.substr(context, start_byte, end_byte - start_byte, unit="BYTE")
        prefix = tf.strings.substr(context, tf.zeros_like(start_byte), start_byte, unit="BYTE")
        answer_start = tf.strings.length(prefix, unit="UTF8_CHAR")
        return {
            "answer_text": answer,
            "answer_start": answer_start,
            "answer_end": answer_start + tf.strings.length(answer, unit="UTF8_CHAR"),
            "score": score,
            "null_score": null_score,
            "start_logits": outputs["start_logits"],
            "end_logits": outputs["end_logits"],
        }

    return serving_default
