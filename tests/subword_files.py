"""Tokenizer files of every family, trained here on the real Wikipedia excerpt (no RoBERTa,
ALBERT, XLNet or XLM-R tokenizer files install offline), and the real sentences to check them on.

Small vocabularies (1,000 to 2,000 pieces) laid out as the released checkpoints lay theirs:
RoBERTa's vocab.json + merges.txt (byte-level BPE, `tokenizers`), ALBERT's and XLNet's
spiece.model, XLM-R's sentencepiece.bpe.model and DeBERTa-v3's spm.model (unigram, `sentencepiece`'s
trainer) with each one's special pieces at its ids.
"""

import functools
import json
import os

FAMILIES = ("roberta", "xlm-roberta", "albert", "xlnet", "deberta-v2")
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


# The tokenizer folders the tests use, trained once by tests/fixtures/record_tokenizer_folders.py and
# copied from there (training took 5 s a SentencePiece family, and the Wikipedia excerpt's sentences
# another 5 to read, in every worker that asked).
RECORDED_FOLDERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "tokenizer_folders")
RECORDED = tuple((family, 1000, 20000) for family in FAMILIES) + (("xlnet", 1000, 3000),)


def write_tokenizer_folder(folder, family, vocab_size=1000, sentences=20000):
    """A checkpoint folder's tokenizer files and a config.json naming `family` and the vocab_size,
    trained on the Wikipedia excerpt's first `sentences` (fewer: faster, for a test that needs a
    tokenizer of the family's layout, not a good one): the recorded folder where there is one
    (`RECORDED`), else trained here."""
    recorded = os.path.join(RECORDED_FOLDERS, f"{family}-{vocab_size}-{sentences}")
    if not os.path.isdir(recorded):
        return train_tokenizer_folder(folder, family, vocab_size, sentences)
    import shutil

    shutil.copytree(recorded, folder, dirs_exist_ok=True)
    return folder


def train_tokenizer_folder(folder, family, vocab_size, sentences):
    os.makedirs(folder, exist_ok=True)
    training_text = os.path.join(folder, "training.txt")
    with open(training_text, "w", encoding="utf-8") as f:
        f.write("\n".join(real_sentences()["wikipedia"][:sentences]))
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
            # DeBERTa-v3's: [PAD] [CLS] [SEP] [UNK] first; [MASK] is the tokenizer's, after the pieces.
            "deberta-v2": dict(
                pad_id=0,
                pad_piece="[PAD]",
                bos_id=1,
                bos_piece="[CLS]",
                eos_id=2,
                eos_piece="[SEP]",
                unk_id=3,
                unk_piece="[UNK]",
            ),
        }[family]
        name = {"xlm-roberta": "sentencepiece.bpe", "deberta-v2": "spm"}.get(family, "spiece")
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
    config = {"model_type": family, "vocab_size": size}
    if family == "deberta-v2":  # a folder as published: cased, [MASK] added after the pieces; segments kept
        config.update(vocab_size=size + 1, type_vocab_size=2)
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "DebertaV2Tokenizer", "do_lower_case": False, "split_by_punct": False}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


def reference_tokenizer(folder, **options):
    """transformers' fast tokenizer of the folder (its from_pretrained reads these files)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: never the hub
    import transformers

    return transformers.AutoTokenizer.from_pretrained(folder, **options)


# Texts the tokenizer.json tests add (the edge cases): emoji with ZWJ, zero-width and
# no-break spaces, ligatures, a 300-character word, runs of whitespace and line breaks, added
# tokens inside text.
JSON_EDGE_CASES = [
    "family 👨\u200d👩\u200d👧\u200d👦 and 🏳\ufe0f\u200d🌈 flags",
    "zero\u200bwidth\u200cjoin\u200d and\u00a0nbsp\u202fnarrow",
    "ligatures ﬁne ﬂow ﬀ ﬃ and ½ ² ™ ① ｆｕｌｌ",
    "x" * 300,
    "word " + "y" * 150 + "z" * 150,
    "\n\n\n   \t\t  \r\n  end",
    "x.\n\ny   1  (word \n\t z",
    "a [MASK] b[MASK]c  [MASK]  d",
    "write to |||EMAIL_ADDRESS||| now",
    "<|begin_of_text|>hi<|end_of_text|> <|mask|> done",
    "[CLS] already [SEP] here [UNK]",
    "I'M SHOUTING, isn't it? DON'T 'S",
    "12345678 9.99 1,000,000",
]


def json_check_sentences():
    """The check sentences, 200 BBC News paragraphs and the tokenizer.json edge cases."""
    from bertlayers.utils.assets import bbc_news_articles

    bbc = [paragraph for text, _ in bbc_news_articles()[:60] for paragraph in text.split("\n") if paragraph][:200]
    return check_sentences() + bbc + JSON_EDGE_CASES


# The kinds of tokenizer.json the modern checkpoints ship, each trained here.
JSON_KINDS = ("modernbert", "eurobert", "nomic_bert", "qwen3", "gemma3")


def write_gemma_tokenizer_json(path, sentences, vocab_size, split_words=True):
    """Gemma's tokenizer.json (transformers' GemmaTokenizer): trained with the word-start mark
    leading each word (SentencePiece's whitespace split; with `split_words` false, on whole texts,
    so that pieces run across words), then written with Gemma's pipeline."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    from bertlayers.tokenizers.sentencepiece_bpe import BYTE_TOKENS, WORD_START

    special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tokenizer.normalizer = normalizers.Replace(" ", WORD_START)
    if split_words:
        tokenizer.pre_tokenizer = pre_tokenizers.Split(WORD_START, behavior="merged_with_next")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=special + list(BYTE_TOKENS),
        limit_alphabet=120,  # the rarer characters fall back to their bytes
        show_progress=False,
    )
    tokenizer.train_from_iterator(sentences, trainer)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>",
        pair="<bos> $A <eos> $B <eos>",
        special_tokens=[("<bos>", tokenizer.token_to_id("<bos>")), ("<eos>", tokenizer.token_to_id("<eos>"))],
    )
    spec = json.loads(tokenizer.to_str())
    # Gemma's byte tokens are pieces of the vocabulary, not added tokens split out of the text.
    spec["added_tokens"] = [token for token in spec["added_tokens"] if token["content"] in special]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    return path


# The tokenizer.json files the tests use, recorded as the folders above are (the decoder families'
# beside their fixtures, which record_decoder_families.py reads): {(kind, vocab_size): path}.
_FIXTURES = os.path.dirname(RECORDED_FOLDERS)
RECORDED_JSON = {
    ("modernbert", 2000): os.path.join(RECORDED_FOLDERS, "modernbert-2000.json"),
    ("eurobert", 2000): os.path.join(RECORDED_FOLDERS, "eurobert-2000.json"),
    ("nomic_bert", 1000): os.path.join(RECORDED_FOLDERS, "nomic_bert-1000.json"),
    ("nomic_bert", 2000): os.path.join(RECORDED_FOLDERS, "nomic_bert-2000.json"),
    ("qwen3", 2000): os.path.join(_FIXTURES, "decoder_families", "qwen3_tokenizer.json"),
    ("gemma3", 2000): os.path.join(_FIXTURES, "decoder_families", "gemma_tokenizer.json"),
}


def write_tokenizer_json(path, kind, vocab_size=2000):
    """A tokenizer.json of `kind` (`train_tokenizer_json`): the recorded file where there is one
    (`RECORDED_JSON`), else trained here."""
    recorded = RECORDED_JSON.get((kind, vocab_size))
    if recorded is None or not os.path.exists(recorded):
        return train_tokenizer_json(path, kind, vocab_size)
    import shutil

    shutil.copy(recorded, path)
    return path


def train_tokenizer_json(path, kind, vocab_size=2000):
    """A tokenizer.json of `kind`, trained by the tokenizers library on the Wikipedia excerpt:
    "modernbert": NFC + byte-level BPE (GPT-2's regex), [CLS] A [SEP] B [SEP], an lstrip [MASK] and
      a non-special added token; "eurobert": Llama-3's regex split + byte-level BPE with
      ignore_merges, <|begin_of_text|> A <|end_of_text|>; "qwen3": NFC, Qwen2's regex split (single
      digits) + byte-level BPE, A <|endoftext|> (Qwen3-Embedding's); "nomic_bert": BERT's normalizer,
      pre-tokenizer and WordPiece, [CLS] A [SEP] B [SEP] with segments; "gemma3": Gemma's " " → "▁"
      and BPE over characters with byte fallback (rare characters left out of the alphabet), as
      transformers' GemmaTokenizer writes it, <bos> A <eos>."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    sentences = real_sentences()["wikipedia"][:8000]  # a real vocabulary of 2,000; more text only takes longer
    if kind == "gemma3":
        return write_gemma_tokenizer_json(path, sentences, vocab_size)
    if kind == "nomic_bert":
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
        template = ("[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1", "[CLS]", "[SEP]")
    else:
        tokenizer = Tokenizer(models.BPE(ignore_merges=kind == "eurobert"))
        if kind == "modernbert":
            tokenizer.normalizer = normalizers.NFC()
            tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            special = ["|||IP_ADDRESS|||", "<|padding|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
            template = ("[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]", "[CLS]", "[SEP]")
        else:
            from bertlayers.tokenizers.tokenizer_json import LLAMA3_PATTERN, QWEN2_PATTERN

            tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(
                        Regex(QWEN2_PATTERN if kind == "qwen3" else LLAMA3_PATTERN), behavior="isolated"
                    ),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
            special = ["<|begin_of_text|>", "<|end_of_text|>", "<|mask|>", "<|pad|>"]
            template = (
                "<|begin_of_text|> $A <|end_of_text|>",
                "<|begin_of_text|> $A <|end_of_text|> $B <|end_of_text|>",
                "<|begin_of_text|>",
                "<|end_of_text|>",
            )
            if kind == "qwen3":  # Qwen3-Embedding's: the text, then <|endoftext|> (where its pooling reads)
                tokenizer.normalizer = normalizers.NFC()
                special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
                template = ("$A <|endoftext|>", "$A <|endoftext|> $B <|endoftext|>", "<|endoftext|>", "<|endoftext|>")
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    tokenizer.train_from_iterator(sentences, trainer)
    single, pair, first, last = template
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single,
        pair=pair,
        special_tokens=[(first, tokenizer.token_to_id(first)), (last, tokenizer.token_to_id(last))],
    )
    spec = json.loads(tokenizer.to_str())
    for token in spec["added_tokens"]:
        if token["content"] in ("[MASK]", "<|mask|>"):
            token["lstrip"] = True  # as ModernBERT's [MASK]: it takes the space before it
    if kind == "modernbert":
        spec["added_tokens"].append(
            {
                "id": len(spec["model"]["vocab"]) - 1,
                "content": "|||EMAIL_ADDRESS|||",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
        # The last BPE token gives its id to the added one (the vocabulary keeps its size).
        last = max(spec["model"]["vocab"], key=spec["model"]["vocab"].get)
        spec["model"]["vocab"]["|||EMAIL_ADDRESS|||"] = spec["model"]["vocab"].pop(last)
        spec["model"]["merges"] = [
            m for m in spec["model"]["merges"] if "".join(m if isinstance(m, list) else m.split(" ")) != last
        ]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    return path
