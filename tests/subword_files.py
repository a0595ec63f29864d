"""Tokenizer files of every family, trained here on the real Wikipedia excerpt (no RoBERTa,
ALBERT, XLNet or XLM-R tokenizer files install offline), and the real sentences to check them on.

Small vocabularies (1,000 to 2,000 pieces) laid out as the released checkpoints lay theirs:
RoBERTa's vocab.json + merges.txt (byte-level BPE, `tokenizers`), ALBERT's and XLNet's
spiece.model and XLM-R's sentencepiece.bpe.model (unigram, `sentencepiece`'s trainer) with
each one's special pieces at its ids.
"""

import functools
import json
import os

FAMILIES = ("roberta", "xlm-roberta", "albert", "xlnet")
# Texts that trip tokenizers: runs of spaces, other whitespace, accents, CJK, emoji, quotes, contractions.
EDGE_CASES = [
    "",
    " ",
    "  two  spaces  ",
    "tabs\tand\nnew\n\nlines",
    " leading",
    "trailing  ",
    "a   b    c",
    "Café naïve résumé ÀÉÎ ß İstanbul",
    "日本語のテキスト 中文",
    "emoji 😀👍🏽 done",
    "``quoted'' and \"quoted\"",
    "a  's  ''s \n\n x",
    "x\u00a0\u00a0y\u3000z",
    "don't I'm they'll we've",
    "1234 56.7 12'000",
]


@functools.cache
def real_sentences():
    """{source: [sentence]}: the Wikipedia excerpt, Rotten Tomatoes snippets, WNUT-2016 tweets."""
    from bertlayers.pretraining_data.corpus import read_wikipedia_dump, wikipedia_excerpt_path
    from bertlayers.task_data.ner import read_conll
    from bertlayers.utils.assets import asset_path, rotten_tomatoes_snippets

    wikipedia = [s for document in read_wikipedia_dump(wikipedia_excerpt_path()) for s in document]
    return {
        "wikipedia": wikipedia,
        "rotten_tomatoes": [text for text, _ in rotten_tomatoes_snippets()],
        "wnut": [" ".join(word for word, _ in sentence) for sentence in read_conll(asset_path("wnut16"))],
    }


def check_sentences():
    """2,515 sentences: 1,000 of Wikipedia (from the end: the start trains the vocabularies),
    1,000 reviews, 500 tweets and the edge cases."""
    sentences = real_sentences()
    return sentences["wikipedia"][-1000:] + sentences["rotten_tomatoes"][:1000] + sentences["wnut"][:500] + EDGE_CASES


def write_tokenizer_folder(folder, family, vocab_size=1000):
    """A checkpoint folder's tokenizer files and a config.json naming `family` and the vocab_size."""
    os.makedirs(folder, exist_ok=True)
    training_text = os.path.join(folder, "training.txt")
    with open(training_text, "w", encoding="utf-8") as f:
        f.write("\n".join(real_sentences()["wikipedia"][:20000]))
    if family == "roberta":
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train(
            [training_text],
            vocab_size=2 * vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        )
        bpe.save_model(folder)
        size = bpe.get_vocab_size()
    else:
        import sentencepiece

        special = {
            "albert": dict(
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=["[CLS]", "[SEP]"],
                user_defined_symbols=["[MASK]"],
            ),
            "xlnet": dict(
                unk_id=0,
                bos_id=1,
                eos_id=2,
                pad_id=-1,
                control_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"],
            ),
            "xlm-roberta": dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1),
        }[family]
        name = "sentencepiece.bpe" if family == "xlm-roberta" else "spiece"
        sentencepiece.SentencePieceTrainer.train(
            input=training_text,
            model_prefix=os.path.join(folder, name),
            vocab_size=vocab_size,
            model_type="unigram",
            character_coverage=0.9995,
            minloglevel=2,
            **special,
        )
        os.remove(os.path.join(folder, name + ".vocab"))
        size = vocab_size + (2 if family == "xlm-roberta" else 0)  # fairseq adds <pad> and <mask>
    os.remove(training_text)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": family, "vocab_size": size}, f)
    return folder


def reference_tokenizer(folder, **options):
    """transformers' fast tokenizer of the folder (its from_pretrained reads these files)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: never the hub
    import transformers

    return transformers.AutoTokenizer.from_pretrained(folder, **options)
