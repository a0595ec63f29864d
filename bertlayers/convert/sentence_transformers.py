"""sentence-transformers folders read as what they are: `modules.json`'s `Transformer`, `Pooling`,
`Dense` and `Normalize` modules as a `SentenceEmbedder`, and `config_sentence_transformers.json`'s
prompts and similarity function beside it.

Both layouts sentence-transformers writes are read: before 6.0 (`sentence_transformers.models.X`,
`pooling_mode_*_tokens` switches, `word_embedding_dimension`) and since (class paths such as
`sentence_transformers.base.modules.dense.Dense`, one `pooling_mode` name, `include_prompt`). What
the library has no counterpart for (another module, several pooling modes concatenated) is refused
by name, file and value, before any weights load.
"""

import dataclasses
import json
import os
import string

import numpy as np

from bertlayers.convert.checkpoint_tensors import read_safetensors
from bertlayers.convert.hub import local_or_hub
from bertlayers.models.sentence_embedder import SentenceEmbedder
from bertlayers.utils.text_files import read_json_object

__all__ = [
    "SentenceTransformersFolder",
    "MultiVectorEncoderFolder",
    "SparseEncoderFolder",
    "cross_encoder_settings",
    "declared_pooling",
    "load_sentence_embedder",
    "read_multi_vector_encoder",
    "read_pylate_folder",
    "read_sentence_transformers",
    "read_sparse_encoder",
    "save_sentence_transformers",
]

# sentence-transformers' pooling modes -> `SequencePooling`'s.
POOLING_MODES = {
    "cls": "first",
    "mean": "mean",
    "max": "max",
    "lasttoken": "last",
    "weightedmean": "weighted_mean",
    "mean_sqrt_len_tokens": "mean_sqrt_len",
}
# Its pre-6.0 switches, one a mode.
LEGACY_POOLING_SWITCHES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# torch activations a Dense module names -> Keras's (torch's GELU is the exact, erf one).
ACTIVATIONS = {
    "torch.nn.modules.activation.Tanh": "tanh",
    "torch.nn.modules.linear.Identity": "linear",
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.GELU": "gelu",
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.activation.SiLU": "silu",
}
MODULES = ("Transformer", "Pooling", "Dense", "Normalize")


@dataclasses.dataclass(frozen=True)
class SentenceTransformersFolder:
    """What a sentence-transformers folder's modules compute, read from its files.

    Attributes:
      transformer: the folder of its `Transformer` module (a Hugging Face checkpoint).
      pooling: the `SequencePooling` mode.
      dense: ({"units", "activation", "use_bias"}, weights file) of each `Dense` module, in order
        (EmbeddingGemma's two: 768 → 3072 → 768).
      normalize: whether a `Normalize` module ends it.
      prompts: {name: prompt}, prepended to a text (`config_sentence_transformers.json`).
      default_prompt_name: the prompt used where none is named (None: none).
      similarity: "cosine", "dot", "euclidean" or "manhattan".
      max_seq_length: the longest input it was made for, in pieces (None: the encoder's).
      include_prompt: whether the pooling reads the prompt's tokens (`Pooling`'s `include_prompt`).
    """

    transformer: str
    pooling: str
    dense: tuple = ()
    normalize: bool = False
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    similarity: str = "cosine"
    max_seq_length: int | None = None
    include_prompt: bool = True


def read_sentence_transformers(source: str) -> SentenceTransformersFolder | None:
    """The modules of the sentence-transformers folder (or Hub name) `source`, or None where it has
    no `modules.json` (a plain checkpoint)."""
    folder = local_or_hub(source)
    modules_path = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_path):
        return None
    settings_path = os.path.join(folder, "config_sentence_transformers.json")
    model_type = read_json_object(settings_path).get("model_type") if os.path.isfile(settings_path) else None
    if model_type == "CrossEncoder":
        raise ValueError(
            f"{folder} is a sentence-transformers CrossEncoder folder (a reranker, pairs in and a score out), "
            "not an embedding model: score pairs with bertlayers.tasks.TextReranker."
        )
    if model_type == "SparseEncoder":
        raise ValueError(
            f"{folder} is a sentence-transformers SparseEncoder folder (a vocabulary-sized sparse vector a "
            "text), not a dense embedding model: encode with bertlayers.tasks.TextSparseEncoder."
        )
    if model_type == "MultiVectorEncoder":
        raise ValueError(
            f"{folder} is a sentence-transformers MultiVectorEncoder folder (a vector a token, scored by MaxSim), "
            "not a single-vector embedding model: encode with bertlayers.tasks.TextMultiVectorEncoder."
        )
    with open(modules_path, encoding="utf-8") as f:
        modules = json.load(f)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise ValueError(f"{modules_path}: expected a list of modules, each with its type.")
    found = {}  # kind -> its folders, in order
    for position, module in enumerate(modules):
        kind = str(module["type"]).rsplit(".", 1)[-1]
        if kind not in MODULES or (kind in found and kind != "Dense"):
            why = "a second one" if kind in found else "a module the library has no counterpart for"
            raise ValueError(
                f"{modules_path}: module {position} is {module['type']} ({why}); the library reads "
                f"{', '.join(MODULES)} (one each but Dense, in that order)."
            )
        found.setdefault(kind, []).append(os.path.join(folder, str(module.get("path", ""))))
    order = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
    if order != sorted(order, key=MODULES.index) or "Transformer" not in found or "Pooling" not in found:
        raise ValueError(
            f"{modules_path}: the modules are {order}; expected Transformer, Pooling[, Dense ...][, Normalize]."
        )
    settings = _settings(folder)
    pooling_config = os.path.join(found["Pooling"][0], "config.json")
    return SentenceTransformersFolder(
        transformer=found["Transformer"][0],
        pooling=_pooling(pooling_config),
        include_prompt=_include_prompt(pooling_config),
        dense=tuple(_dense(path) for path in found.get("Dense", ())),
        normalize="Normalize" in found,
        prompts=settings["prompts"],
        default_prompt_name=settings["default_prompt_name"],
        similarity=settings["similarity"],
        max_seq_length=_max_seq_length(folder, found["Transformer"][0]),
    )


def load_sentence_embedder(
    source: str, dtype: str | None = None
) -> tuple[SentenceEmbedder, SentenceTransformersFolder]:
    """The `SentenceEmbedder` of a sentence-transformers folder (or Hub name), its Dense modules'
    weights loaded, and what `read_sentence_transformers` read of it."""
    from bertlayers.convert.loading import load_encoder  # which reads pooling through this module

    spec = read_sentence_transformers(source)
    if spec is None:
        raise FileNotFoundError(f"{source} has no modules.json: not a sentence-transformers folder.")
    encoder = load_encoder(spec.transformer, dtype=dtype)
    model = SentenceEmbedder(
        encoder,
        pooling=spec.pooling,
        normalize=spec.normalize,
        dense=[layer for layer, _ in spec.dense],
        include_prompt=spec.include_prompt,
    )
    for index, (layer, weights_path) in enumerate(spec.dense):
        tensors = read_safetensors(weights_path)
        kernel = np.asarray(tensors["linear.weight"]).T  # torch Linear [out, in] -> Keras [in, out]
        dense = model.get_layer(f"dense_{index}")
        if tuple(kernel.shape) != tuple(dense.kernel.shape):
            raise ValueError(
                f"{weights_path}: linear.weight is {tuple(kernel.shape[::-1])} but the module's config says "
                f"{layer['units']} outputs from {dense.kernel.shape[0]} inputs."
            )
        dense.set_weights([kernel, np.asarray(tensors["linear.bias"])] if layer["use_bias"] else [kernel])
    return model, spec


def declared_pooling(folder: str) -> str | None:
    """The `SequencePooling` mode a sentence-transformers folder's Pooling module declares (the one
    `modules.json` names, else `1_Pooling/`), or None where it has none; whether it pools the prompt
    is not asked (a task head over it reads no prompt)."""
    path = os.path.join(folder, "1_Pooling")
    modules_path = os.path.join(folder, "modules.json")
    if os.path.isfile(modules_path):
        with open(modules_path, encoding="utf-8") as f:
            modules = json.load(f)
        named = [
            m.get("path", "") for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling")
        ]
        path = os.path.join(folder, named[0]) if named else path
    config = os.path.join(path, "config.json")
    return _pooling(config) if os.path.isfile(config) else None


def _pooling(path):
    config = read_json_object(path)
    if "pooling_mode" in config:
        modes = config["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else list(modes)
    else:
        modes = [mode for switch, mode in LEGACY_POOLING_SWITCHES.items() if config.get(switch)]
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise ValueError(
            f"{path}: pooling mode {modes}; the library pools one of {', '.join(POOLING_MODES)} (several "
            "concatenated are not supported)."
        )
    return POOLING_MODES[modes[0]]


def _include_prompt(path):
    """The Pooling module's `include_prompt` (true where it says none, as before 6.0)."""
    value = read_json_object(path).get("include_prompt", True)
    if not isinstance(value, bool):
        raise ValueError(f"{path}: include_prompt must be true or false, got {value!r}.")
    return value


def _dense(folder):
    config_path = os.path.join(folder, "config.json")
    config = read_json_object(config_path)
    activation = config.get("activation_function", "torch.nn.modules.activation.Tanh")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{config_path}: activation_function {activation!r}; the library reads {', '.join(ACTIVATIONS)}."
        )
    weights = os.path.join(folder, "model.safetensors")
    if not os.path.isfile(weights):
        hint = (
            " (it has pytorch_model.bin: save it as safetensors)"
            if os.path.isfile(os.path.join(folder, "pytorch_model.bin"))
            else ""
        )
        raise FileNotFoundError(f"{folder} has no model.safetensors{hint}.")
    layer = {
        "units": int(config["out_features"]),
        "activation": ACTIVATIONS[activation],
        "use_bias": bool(config.get("bias", True)),
    }
    return layer, weights


def _settings(folder, similarities=("cosine", "dot", "euclidean", "manhattan")):
    path = os.path.join(folder, "config_sentence_transformers.json")
    config = read_json_object(path) if os.path.isfile(path) else {}
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ValueError(f"{path}: prompts must map names to strings, got {prompts!r}.")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ValueError(f"{path}: default_prompt_name {default!r} is not among the prompts {sorted(prompts)}.")
    similarity = config.get("similarity_fn_name") or similarities[0]
    if similarity not in similarities:
        raise ValueError(f"{path}: similarity_fn_name {similarity!r} is not {', '.join(similarities)}.")
    return {"prompts": dict(prompts), "default_prompt_name": default, "similarity": similarity}


def _max_seq_length(folder, transformer):
    """sentence_bert_config.json's max_seq_length (before 6.0), else the tokenizer's
    model_max_length (6.x writes it there), else None."""
    for path, key in (
        (os.path.join(transformer, "sentence_bert_config.json"), "max_seq_length"),
        (os.path.join(folder, "sentence_bert_config.json"), "max_seq_length"),
        (os.path.join(transformer, "tokenizer_config.json"), "model_max_length"),
    ):
        if os.path.isfile(path):
            value = read_json_object(path).get(key)
            if isinstance(value, int) and 0 < value < 1_000_000:
                return value
    return None


# sentence-transformers' CrossEncoder activations (class paths as it saves them) by our names.
CROSS_ENCODER_ACTIVATIONS = {
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.modules.activation.Tanh": "tanh",
}


def cross_encoder_settings(source: str) -> dict:
    """What a reranker folder (or Hub name) says of its scores: {"activation": "sigmoid",
    "identity" or "tanh", "max_seq_length": int or None}. A sentence-transformers `CrossEncoder`
    folder names its activation in config_sentence_transformers.json (since 4.0) or config.json's
    `sbert_ce_default_activation_function` (before); a plain one-label classifier folder gets
    sentence-transformers' default, sigmoid. A sentence-transformers folder of another model
    type is refused by name."""
    folder = local_or_hub(source)
    path = os.path.join(folder, "config_sentence_transformers.json")
    config = read_json_object(path) if os.path.isfile(path) else {}
    model_type = config.get("model_type", "CrossEncoder" if os.path.isfile(path) else None)
    if os.path.isfile(os.path.join(folder, "modules.json")) and model_type != "CrossEncoder":
        raise ValueError(
            f"{folder} is a sentence-transformers {model_type or 'SentenceTransformer'} folder, not a "
            "CrossEncoder: embed with bertlayers.tasks.TextEmbedder."
        )
    activation = config.get("activation_fn")
    if activation is None:
        hf_config = read_json_object(os.path.join(folder, "config.json"))
        activation = hf_config.get("sbert_ce_default_activation_function")
        if activation is None and isinstance(hf_config.get("sentence_transformers"), dict):
            activation = hf_config["sentence_transformers"].get("activation_fn")
    if activation is None:
        return {"activation": "sigmoid", "max_seq_length": _max_seq_length(folder, folder)}
    if activation not in CROSS_ENCODER_ACTIVATIONS:
        raise ValueError(
            f"{folder}: the activation {activation!r} has no counterpart in the library; it reads "
            f"{', '.join(CROSS_ENCODER_ACTIVATIONS)}."
        )
    return {"activation": CROSS_ENCODER_ACTIVATIONS[activation], "max_seq_length": _max_seq_length(folder, folder)}


@dataclasses.dataclass(frozen=True)
class SparseEncoderFolder:
    """What a sentence-transformers `SparseEncoder` folder computes, read from its files.

    Attributes:
      transformer: the folder of its masked-LM module (a `...ForMaskedLM` checkpoint).
      pooling, activation: its `SpladePooling` module's ("max" or "sum"; "relu" or "log1p_relu").
      prompts, default_prompt_name, max_seq_length: as in `SentenceTransformersFolder`.
    """

    transformer: str
    pooling: str = "max"
    activation: str = "relu"
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    max_seq_length: int | None = None


def read_sparse_encoder(source: str) -> SparseEncoderFolder:
    """The SPLADE modules of the sentence-transformers `SparseEncoder` folder (or Hub name)
    `source`: a masked-LM `MLMTransformer` (sentence-transformers 5) or `Transformer` with
    `transformer_task` "fill-mask" (6), then `SpladePooling`. Any other module (a sparse
    autoencoder, an inference-free `Router`) is refused by name before any weights load."""
    folder = local_or_hub(source)
    modules_path = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_path):
        raise FileNotFoundError(f"{folder} has no modules.json: not a sentence-transformers SparseEncoder folder.")
    with open(modules_path, encoding="utf-8") as f:
        modules = json.load(f)
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules if isinstance(module, dict)]
    if len(kinds) != len(modules) or kinds not in (
        ["MLMTransformer", "SpladePooling"],
        ["Transformer", "SpladePooling"],
    ):
        raise ValueError(
            f"{modules_path}: the modules are {kinds}; the library reads a SPLADE model: MLMTransformer (or "
            "Transformer with transformer_task fill-mask), then SpladePooling."
        )
    transformer, pooling_folder = (os.path.join(folder, str(module.get("path", ""))) for module in modules)
    if kinds[0] == "Transformer":
        task_path = os.path.join(transformer, "sentence_bert_config.json")
        task = read_json_object(task_path).get("transformer_task") if os.path.isfile(task_path) else None
        if task != "fill-mask":
            raise ValueError(f"{task_path}: transformer_task is {task!r}; a SPLADE model's is 'fill-mask'.")
    pooling_path = os.path.join(pooling_folder, "config.json")
    config = read_json_object(pooling_path)
    pooling, activation = config.get("pooling_strategy", "max"), config.get("activation_function", "relu")
    if pooling not in ("max", "sum") or activation not in ("relu", "log1p_relu"):
        raise ValueError(
            f"{pooling_path}: pooling_strategy {pooling!r} / activation_function {activation!r}; the library reads "
            "max or sum, relu or log1p_relu."
        )
    settings = _settings(folder)
    return SparseEncoderFolder(
        transformer=transformer,
        pooling=pooling,
        activation=activation,
        prompts=settings["prompts"],
        default_prompt_name=settings["default_prompt_name"],
        max_seq_length=_max_seq_length(folder, transformer),
    )


@dataclasses.dataclass(frozen=True)
class MultiVectorEncoderFolder:
    """What a sentence-transformers `MultiVectorEncoder` folder (ColBERT) computes, read from its files.

    Attributes:
      transformer: the folder of its `Transformer` module (a Hugging Face checkpoint).
      dense: ({"units", "activation", "use_bias"}, weights file): its token-level `Dense` module.
      normalize: whether a `Normalize` module ends it (unit-length token vectors).
      query_length, document_length: the most pieces of a query and of a document (None: the
        model's `max_seq_length`); with `query_expansion`, queries are exactly its `length`.
      query_expansion: {"length", "attend", "token" (None: the tokenizer's mask token)}, or None.
      skiplist_words: pieces never scored in the texts of `skiplist_tasks` ("query", "document").
      prompts, default_prompt_name, max_seq_length: as in `SentenceTransformersFolder`.
      similarity: "maxsim" or "meanmaxsim".
      markers: the prompts' leading marker tokens of a PyLate checkpoint ([unused0], "[Q] "), which
        its training inserted as ids: split out of the prompted text as one piece each where the
        tokenizer has them, as sentence-transformers does.
    """

    transformer: str
    dense: tuple
    normalize: bool = True
    query_length: int | None = None
    document_length: int | None = None
    query_expansion: dict | None = None
    skiplist_words: tuple = ()
    skiplist_tasks: tuple = ("document",)
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    similarity: str = "maxsim"
    max_seq_length: int | None = None
    markers: tuple = ()


MULTI_VECTOR_MODULES = ("Transformer", "Dense", "MultiVectorMask", "Normalize")
# What PyLate applied inline (modules.json lists its Transformer and Dense only): the punctuation
# skiplist where its config names none, and unit-length token vectors.
PYLATE_SKIPLIST = tuple(string.punctuation)


def read_multi_vector_encoder(source: str) -> MultiVectorEncoderFolder:
    """The late-interaction modules of the sentence-transformers 6 `MultiVectorEncoder` folder (or
    Hub name) `source`: `Transformer` (its query and document lengths, its query expansion), a
    token-level `Dense`, `MultiVectorMask` (its skiplist), then optionally `Normalize`; or of a
    PyLate checkpoint (`read_pylate_folder`). Stanford ColBERT's own layout, and any other module,
    are refused by name before any weights load."""
    folder = local_or_hub(source)
    modules_path = os.path.join(folder, "modules.json")
    settings_path = os.path.join(folder, "config_sentence_transformers.json")
    config = read_json_object(settings_path) if os.path.isfile(settings_path) else {}
    if os.path.isfile(modules_path) and config.get("model_type") == "ColBERT":
        return read_pylate_folder(folder)
    if not os.path.isfile(modules_path) or "query_prefix" in config:
        raise ValueError(
            f"{folder} is not a sentence-transformers 6 MultiVectorEncoder folder (modules.json with Transformer, "
            "Dense, MultiVectorMask[, Normalize]) nor a PyLate one; a Stanford ColBERT checkpoint loads in "
            "sentence-transformers 6 (MultiVectorEncoder(folder)), whose save() writes that layout."
        )
    with open(modules_path, encoding="utf-8") as f:
        modules = json.load(f)
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules if isinstance(module, dict)]
    if len(kinds) != len(modules) or kinds not in (list(MULTI_VECTOR_MODULES), list(MULTI_VECTOR_MODULES[:3])):
        raise ValueError(
            f"{modules_path}: the modules are {kinds}; the library reads a multi-vector model: "
            f"{', '.join(MULTI_VECTOR_MODULES[:3])}[, Normalize]."
        )
    transformer, dense_folder, mask_folder = (os.path.join(folder, str(m.get("path", ""))) for m in modules[:3])
    dense_config_path = os.path.join(dense_folder, "config.json")
    dense_config = read_json_object(dense_config_path)
    for key, expected in (("module_input_name", "token_embeddings"), ("use_residual", False)):
        if dense_config.get(key, expected) != expected:
            raise ValueError(
                f"{dense_config_path}: {key} is {dense_config[key]!r}; a multi-vector Dense's is {expected!r}."
            )
    mask_path = os.path.join(mask_folder, "config.json")
    mask = read_json_object(mask_path) if os.path.isfile(mask_path) else {}
    if mask.get("keep_only_token_ids") is not None:
        raise ValueError(f"{mask_path}: keep_only_token_ids (image patches' documents) is not read by the library.")
    tasks = mask.get("skiplist_tasks", ["document"])
    tasks = (tasks,) if isinstance(tasks, str) else tuple(tasks)
    transformer_settings_path = os.path.join(transformer, "sentence_bert_config.json")
    transformer_settings = (
        read_json_object(transformer_settings_path) if os.path.isfile(transformer_settings_path) else {}
    )
    expansion = transformer_settings.get("query_expansion")
    if expansion is not None:
        if expansion.get("strategy") != "fixed" or not isinstance(expansion.get("length"), int):
            raise ValueError(
                f"{transformer_settings_path}: query_expansion {expansion!r}; the library expands queries to a "
                "fixed length (strategy 'fixed', an integer length)."
            )
        expansion = {
            "length": expansion["length"],
            "attend": bool(expansion.get("attend", False)),
            "token": expansion.get("token"),
        }
    settings = _settings(folder, similarities=("maxsim", "meanmaxsim"))
    return MultiVectorEncoderFolder(
        transformer=transformer,
        dense=_dense(dense_folder),
        normalize=len(kinds) == 4,
        query_length=transformer_settings.get("query_length"),
        document_length=transformer_settings.get("document_length"),
        query_expansion=expansion,
        skiplist_words=tuple(str(word) for word in mask.get("skiplist_words") or ()),
        skiplist_tasks=tasks,
        prompts=settings["prompts"],
        default_prompt_name=settings["default_prompt_name"],
        similarity=settings["similarity"],
        max_seq_length=_max_seq_length(folder, transformer),
    )


def read_pylate_folder(folder: str) -> MultiVectorEncoderFolder:
    """A PyLate ColBERT checkpoint (`model_type` "ColBERT"), read as sentence-transformers 6 reads
    it: modules.json lists its Transformer and Dense only (the skiplist, PyLate's punctuation where
    the config names none, and the normalization were PyLate's own steps); the config's
    `query_prefix` / `document_prefix` lead the query and document prompts (`markers`);
    `do_query_expansion` with `query_length` and `attend_to_expansion_tokens` is the fixed-length
    [MASK] expansion; `document_length` the documents' longest."""
    modules_path = os.path.join(folder, "modules.json")
    settings_path = os.path.join(folder, "config_sentence_transformers.json")
    config = read_json_object(settings_path)
    with open(modules_path, encoding="utf-8") as f:
        modules = json.load(f)
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules if isinstance(module, dict)]
    if len(kinds) != len(modules) or kinds != ["Transformer", "Dense"]:
        raise ValueError(
            f"{modules_path}: the modules are {kinds}; a PyLate ColBERT checkpoint the library reads has "
            "Transformer, Dense."
        )
    transformer, dense_folder = (os.path.join(folder, str(m.get("path", ""))) for m in modules)
    dense_config_path = os.path.join(dense_folder, "config.json")
    if read_json_object(dense_config_path).get("use_residual", False):
        raise ValueError(f"{dense_config_path}: use_residual is true; a multi-vector Dense's is false.")
    prompts, markers = dict(config.get("prompts") or {}), []
    for key, task in (("query_prefix", "query"), ("document_prefix", "document")):
        if key in config:
            prefix = config[key] or ""
            if not isinstance(prefix, str):
                raise ValueError(f"{settings_path}: {key} must be a string, got {prefix!r}.")
            prompts[task] = prefix + (prompts.get(task) or "").removeprefix(prefix)
            markers.append(prefix)
    if not all(isinstance(value, str) for value in prompts.values()):
        raise ValueError(f"{settings_path}: prompts must map names to strings, got {prompts!r}.")
    expansion, query_length = config.get("query_expansion", ()), config.get("query_length")
    if expansion == ():  # PyLate's flat settings: expansion on unless switched off
        expansion = None
        if config.get("do_query_expansion", True) is not False:
            attend = config.get("attend_to_expansion_tokens", config.get("attend_to_mask_tokens", False))
            expansion = {"length": int(query_length or 32), "attend": bool(attend), "token": None}
            query_length = None
    elif expansion is not None:
        raise ValueError(
            f"{settings_path}: query_expansion {expansion!r} beside PyLate's settings; the library reads "
            "do_query_expansion, query_length and attend_to_expansion_tokens there."
        )
    skiplist = config.get("skiplist_words")
    similarity = str(config.get("similarity_fn_name") or "maxsim")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ValueError(
            f"{settings_path}: default_prompt_name {default!r} is not among the prompts {sorted(prompts)}."
        )
    return MultiVectorEncoderFolder(
        transformer=transformer,
        dense=_dense(dense_folder),
        normalize=True,
        query_length=query_length,
        document_length=config.get("document_length"),
        query_expansion=expansion,
        skiplist_words=tuple(str(word) for word in (PYLATE_SKIPLIST if skiplist is None else skiplist)),
        skiplist_tasks=("document",),
        prompts=prompts,
        default_prompt_name=default,
        # PyLate writes "MaxSim", which sentence-transformers 6 does not know and reads as its default
        similarity=similarity if similarity in ("maxsim", "meanmaxsim") else "maxsim",
        max_seq_length=_max_seq_length(folder, transformer),
        markers=tuple(marker for marker in markers if marker),
    )


def save_sentence_transformers(
    model: SentenceEmbedder,
    folder: str,
    prompts: dict | None = None,
    default_prompt_name: str | None = None,
    similarity: str = "cosine",
    max_seq_length: int | None = None,
) -> str:
    """Write `model` as a sentence-transformers folder, in the layout sentence-transformers 6
    writes: its encoder as the `Transformer` module at the top (a Hugging Face checkpoint:
    `save_huggingface`), then `1_Pooling` (its pooling mode), a `Dense` module a dense layer (weights
    and activation), `Normalize` where it normalizes, `config_sentence_transformers.json` (prompts,
    default prompt, similarity function) and the tokenizer's `model_max_length` (`max_seq_length`).
    `SentenceTransformer(folder)` then computes what the model computes; a plain checkpoint folder
    would be read there with mean pooling and nothing after it. Written whole or not at all; an
    existing `folder` is refused."""
    from bertlayers.convert.saving import save_huggingface  # which writes the encoder
    from bertlayers.utils import atomic_files

    if not isinstance(model, SentenceEmbedder):
        raise ValueError(f"save_sentence_transformers takes a SentenceEmbedder, got a {type(model).__name__}.")
    if similarity not in ("cosine", "dot", "euclidean", "manhattan"):
        raise ValueError(f"similarity must be cosine, dot, euclidean or manhattan, got {similarity!r}.")
    if os.path.exists(folder):
        raise FileExistsError(f"{folder} exists; save_sentence_transformers writes a new folder.")
    modes = {ours: theirs for theirs, ours in POOLING_MODES.items()}
    activations = {ours: theirs for theirs, ours in ACTIVATIONS.items()}
    dense = [(layer, model.get_layer(f"dense_{i}")) for i, layer in enumerate(model.dense or ())]
    unknown = [layer["activation"] for layer, _ in dense if layer.get("activation", "linear") not in activations]
    if unknown:
        raise ValueError(f"A dense layer's activation {unknown[0]!r} has no sentence-transformers counterpart.")
    width = int(model.encoder.config.hidden_size)
    modules = [("", "sentence_transformers.base.modules.transformer.Transformer")]
    with atomic_files.atomic_path(folder) as staging:
        save_huggingface(model.encoder, staging)
        modules.append(("1_Pooling", "sentence_transformers.sentence_transformer.modules.pooling.Pooling"))
        pooling = {"embedding_dimension": width, "pooling_mode": modes[model.pooling]}
        _write_module(staging, "1_Pooling", {**pooling, "include_prompt": model.include_prompt}, named=False)
        for layer, keras_dense in dense:
            path = f"{len(modules)}_Dense"
            modules.append((path, "sentence_transformers.base.modules.dense.Dense"))
            kernel = np.asarray(keras_dense.kernel)  # [in, out] -> torch Linear [out, in]
            config = {
                "in_features": int(kernel.shape[0]),
                "out_features": int(kernel.shape[1]),
                "bias": bool(layer.get("use_bias", True)),
                "activation_function": activations[layer.get("activation", "linear")],
            }
            _write_module(staging, path, config)
            tensors = {"linear.weight": np.ascontiguousarray(kernel.T)}
            if config["bias"]:
                tensors["linear.bias"] = np.asarray(keras_dense.bias)
            from safetensors.numpy import save_file

            save_file(tensors, os.path.join(staging, path, "model.safetensors"), metadata={"format": "pt"})
        if model.normalize:
            path = f"{len(modules)}_Normalize"
            modules.append((path, "sentence_transformers.base.modules.normalize.Normalize"))
            _write_module(staging, path, {})
        atomic_files.write_json(
            os.path.join(staging, "modules.json"),
            [{"idx": i, "name": str(i), "path": path, "type": kind} for i, (path, kind) in enumerate(modules)],
            indent=2,
        )
        atomic_files.write_json(
            os.path.join(staging, "sentence_bert_config.json"),
            {
                "transformer_task": "feature-extraction",
                "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
                "module_output_name": "token_embeddings",
            },
            indent=4,
        )
        settings = {
            "model_type": "SentenceTransformer",
            "prompts": dict(prompts or {}),
            "default_prompt_name": default_prompt_name,
            "similarity_fn_name": similarity,
        }
        atomic_files.write_json(os.path.join(staging, "config_sentence_transformers.json"), settings, indent=2)
        if max_seq_length is not None:  # sentence-transformers 6 reads it as the tokenizer's longest input
            path = os.path.join(staging, "tokenizer_config.json")
            config = read_json_object(path) if os.path.isfile(path) else {}
            atomic_files.write_json(path, {**config, "model_max_length": int(max_seq_length)}, indent=2)
    return folder


def _write_module(folder, path, config, named=True):
    """A module's folder and config.json; `named`: with the input and output names sentence-transformers
    6 gives its Dense and Normalize modules (its Pooling takes none)."""
    from bertlayers.utils import atomic_files

    os.makedirs(os.path.join(folder, path))
    names = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"} if named else {}
    atomic_files.write_json(os.path.join(folder, path, "config.json"), {**config, **names}, indent=4)
