"""TF Serving's folder: numbered versions, each written whole or not at all, a pair of models
committed together (and recovered after a kill), one kind of model per name, and `models.config`."""

import json
import logging
import os
import posixpath
import re
import uuid

from bertlayers.startup import require_tensorflow
from bertlayers.utils import atomic_files

tf = require_tensorflow(__name__)
logger = logging.getLogger(__name__)


def next_version(model_dir: str) -> int:
    """1 + the largest integer version folder under `model_dir` (1 when there is none)."""
    versions = [int(n) for n in os.listdir(model_dir) if n.isdigit()] if os.path.isdir(model_dir) else []
    return max(versions, default=0) + 1


def signature_summary(version_dir):
    """{signature key: (inputs {name: "dtype shape"}, output names)} of the SavedModel in
    `version_dir`, read from its `saved_model.pb` (nothing is loaded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as file:
        saved.ParseFromString(file.read())
    summary = {}
    for key, signature in saved.meta_graphs[0].signature_def.items():
        inputs = {
            name: f"{tf.dtypes.as_dtype(info.dtype).name} {[d.size for d in info.tensor_shape.dim]}"
            for name, info in signature.inputs.items()
        }
        summary[key] = (inputs, sorted(signature.outputs))
    return summary


def check_same_endpoint(model_dir, staged_dir):
    """Refuse a new version whose signatures (their names, inputs or outputs) differ from the newest
    version's in `model_dir`: TF Serving serves the newest version, so its clients would find the
    endpoint's inputs changed under them (a text model replaced by an ids model, say)."""
    versions = sorted(
        (
            int(n)
            for n in os.listdir(model_dir)
            if n.isdigit() and os.path.isfile(os.path.join(model_dir, n, "saved_model.pb"))
        ),
        reverse=True,
    )
    if not versions:
        return
    newest = os.path.join(model_dir, str(versions[0]))
    old, new = signature_summary(newest), signature_summary(staged_dir)
    if old == new:
        return
    keys = sorted(set(old) | set(new))
    changed = next(k for k in keys if old.get(k) != new.get(k))
    raise ValueError(
        f"{model_dir} serves another kind of model: its newest version ({newest}) has signature {changed!r} "
        f"{_described(old.get(changed))}, this export {_described(new.get(changed))}. A model name keeps its "
        "inputs and outputs across versions (TF Serving switches its clients to the newest); export under another name."
    )


def _described(entry):
    if entry is None:
        return "absent"
    inputs, outputs = entry
    return f"with inputs {dict(sorted(inputs.items()))} and outputs {outputs}"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_JOURNAL = ".export-journal-"


def check_model_name(name):
    """A TF Serving model name that is one folder under the base: no path tricks."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            f"Model name {name!r} must start with a letter or digit and use letters, digits, '_', '.' "
            f"and '-' only (no '..', no '/'): it names a folder under the export base."
        )
    return name


def recover_exports(base_dir: str) -> None:
    """Finish exports killed while renaming their versions into place, and drop half-written ones.

    Call it holding the base's lock (`atomic_files.locked(base_dir)`): an export stages every
    SavedModel of a pair first, then writes a journal naming the renames, then renames. A
    journal left behind means all its stages are complete, so its renames are completed (the
    pair appears together); a journal still being written (`.partial`, left by a kill or a full
    disk) and a stage whose writer is dead are unfinished writes and are removed. Nothing else
    is touched: a live writer's stages, and folders the library did not write, stay.
    """
    if not os.path.isdir(base_dir):
        return
    atomic_files.remove_orphaned_staging(base_dir)  # journals being written when their writer died
    for journal in sorted(n for n in os.listdir(base_dir) if n.startswith(_JOURNAL) and n.endswith(".json")):
        path = os.path.join(base_dir, journal)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            renames = [(str(a), str(b)) for a, b in json.loads(text)]
        except (ValueError, TypeError):
            raise ValueError(
                f"{path} is not an export journal this library wrote (it should list [staging, final] "
                f"folder pairs); move it out of {base_dir} and export again."
            ) from None
        for staging, final in renames:
            if os.path.isdir(staging) and not os.path.exists(final):
                os.rename(staging, final)
        os.remove(path)
    for name in os.listdir(base_dir):
        model_dir = os.path.join(base_dir, name)
        if os.path.isdir(model_dir) and not name.startswith("."):
            atomic_files.remove_orphaned_staging(model_dir)


def commit_together(base_dir, staged):
    """Rename every {staging folder: final folder} into place, as one unit (see recover_exports)."""
    journal = os.path.join(base_dir, f"{_JOURNAL}{uuid.uuid4().hex[:8]}.json")
    atomic_files.write_json(journal, [[os.path.abspath(a), os.path.abspath(b)] for a, b in staged.items()])
    for staging, final in staged.items():
        os.rename(staging, final)
    os.remove(journal)


def is_model_folder(path):
    """Whether `path` holds at least one SavedModel version (`<integer>/saved_model.pb`): what
    TF Serving can load, and so what `models.config` names."""
    return os.path.isdir(path) and any(
        n.isdigit() and os.path.isfile(os.path.join(path, n, "saved_model.pb")) for n in os.listdir(path)
    )


_RECORDED_BASE = re.compile(r"^# serving_base: (\S+)$", re.MULTILINE)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_COMPOSE_BASE = re.compile(r"--model_config_file=(\S+)/models\.config")


def _config_entries(text, path):
    """{name: entry text} of each `config { ... }` of the `model_config_list` in `text` (TF Serving's
    ModelServerConfig in text format), and the offset of the list's closing brace. Comments and
    strings are skipped; a file without the list is refused, naming it."""
    depth, i, list_at, close_at, entries, entry_at = 0, 0, None, None, {}, None
    while i < len(text):
        char = text[i]
        if char == "#":  # a comment runs to the end of its line
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        if char == '"':  # a string, escapes and all
            string = _STRING.match(text, i)
            i = string.end() if string else len(text)
            continue
        if char == "{":
            depth += 1
            before = re.search(r"([A-Za-z_]+)\s*:?\s*$", text[:i])
            key = before.group(1) if before else ""
            if depth == 1 and key == "model_config_list":
                list_at = i
            elif depth == 2 and list_at is not None and key == "config":
                entry_at = i
        elif char == "}":
            if depth == 2 and entry_at is not None:
                entry = text[entry_at : i + 1]
                name = re.search(r'\bname\s*:\s*"([^"]*)"', entry)
                entries[name.group(1) if name else ""] = entry
                entry_at = None
            elif depth == 1 and list_at is not None:
                close_at = i
            depth -= 1
        i += 1
    if close_at is None:
        raise ValueError(
            f"{path} holds no `model_config_list {{ ... }}` that closes, which is what TF Serving reads and an "
            "export adds its models to: correct it, or remove it to have it written again."
        )
    return entries, close_at


def check_serving_base(base_dir: str, serving_base: str = "/models") -> None:
    """Refuse, before any work, an export whose `serving_base` is not the mount that the folder's
    `models.config` and `docker-compose.yml` already name (its models would be listed under two
    mounts), or a `models.config` an export cannot add to."""
    if not serving_base.startswith("/"):
        raise ValueError(f"serving_base must be an absolute path inside the container, got {serving_base!r}.")
    found = {}
    config_path, compose_path = os.path.join(base_dir, "models.config"), os.path.join(base_dir, "docker-compose.yml")
    if os.path.isfile(config_path):
        text = open(config_path, encoding="utf-8").read()
        _config_entries(text, config_path)
        recorded = _RECORDED_BASE.search(text)
        if recorded:
            found[config_path] = recorded.group(1)
    if os.path.isfile(compose_path):
        mounted = _COMPOSE_BASE.search(open(compose_path, encoding="utf-8").read())
        if mounted:
            found[compose_path] = mounted.group(1)
    for path, base in found.items():
        if base != serving_base:
            raise ValueError(
                f"{path} serves this folder from {base}, and serving_base is {serving_base!r}: the export's models "
                f"would be listed under another mount than the others. Export with serving_base={base!r}, or "
                "change models.config and docker-compose.yml together (or remove both to have them written again)."
            )


def _entry(name, base_path):
    return f'  config {{\n    name: "{name}"\n    base_path: "{base_path}"\n    model_platform: "tensorflow"\n  }}\n'


def write_models_config(base_dir: str, serving_base: str = "/models", names: list[str] | None = None) -> str:
    """Write the TF Serving configuration of the models under `base_dir` (atomically):
    `models.config` naming them as a container sees them (`<serving_base>/<name>`: the base folder
    mounted at `serving_base`), `models.local.config` with this host's absolute paths; and, where
    absent, `batching.config` and `docker-compose.yml` (`SERVING_FILES`).

    A `models.config` that exists is the user's as much as ours (a `model_version_policy` pinning
    what is served, entries of their own, comments): `names` (the models an export just wrote; every
    model folder when None) that it does not list are added before its closing brace, and nothing else
    in it changes. Written anew it lists every folder TF Serving can load (`is_model_folder`):
    leftovers (a `stale.partial/`, an empty folder) are not listed. `models.local.config` is
    rewritten each time. Returns the models.config path.
    """
    check_serving_base(base_dir, serving_base)
    folders = sorted(
        n
        for n in os.listdir(base_dir)
        if re.fullmatch(r"[A-Za-z0-9_.-]+", n) and not n.startswith(".") and is_model_folder(os.path.join(base_dir, n))
    )
    wanted = folders if names is None else [n for n in names if n in folders]

    path = os.path.join(base_dir, "models.config")
    if os.path.isfile(path):
        text = open(path, encoding="utf-8").read()
        entries, close_at = _config_entries(text, path)
        missing = [n for n in wanted if n not in entries]
        if missing:
            added = "".join(_entry(n, posixpath.join(serving_base, n)) for n in missing)
            line_start = text.rfind("\n", 0, close_at) + 1  # the closing brace's own line, when it has one
            at = line_start if not text[line_start:close_at].strip() else close_at
            atomic_files.write_text(path, text[:at] + added + text[at:])
            logger.info(f"Added {', '.join(missing)} to {path} (the rest of it is as it was)")
        for name in wanted:
            if name in entries and "model_version_policy" in entries[name]:
                logger.warning(
                    f"{path} sets the model_version_policy of {name}: TF Serving serves the versions it names, "
                    "which may not be the newest."
                )
    else:
        header = (
            "# TF Serving's models (ModelServerConfig). Edits stay: an export adds the models it writes\n"
            "# that this list does not name, and changes nothing else.\n"
            f"# serving_base: {serving_base}\n"
        )
        entries = "".join(_entry(n, posixpath.join(serving_base, n)) for n in folders)
        atomic_files.write_text(path, header + "model_config_list {\n" + entries + "}\n")
    local = "".join(_entry(n, os.path.abspath(os.path.join(base_dir, n))) for n in folders)
    atomic_files.write_text(
        os.path.join(base_dir, "models.local.config"),
        "# models.config with this host's paths, written anew by each export.\nmodel_config_list {\n" + local + "}\n",
    )
    for name, text in SERVING_FILES.items():
        if not os.path.exists(os.path.join(base_dir, name)):
            atomic_files.write_text(os.path.join(base_dir, name), text.replace("{serving_base}", serving_base))
    return path


# TF Serving's image, at the version of the request protos the library pins (tensorflow-serving-api).
SERVING_IMAGE = "tensorflow/serving:2.19.0"


def batch_in_tf_serving(version_dir: str) -> None:
    """Have TF Serving batch the SavedModel in `version_dir` (one that takes text: strings a row)."""
    atomic_files.write_text(os.path.join(version_dir, BATCHING_PARAMS_FILE), TEXT_BATCHING_PARAMS)


# What TF Serving batches: the text models only. Under `--enable_per_model_batching_parameters`
# (docker-compose.yml passes it) a model is batched where its version folder holds this file, with
# these settings; the others are run request by request. An ids model is not batched: TF Serving
# pads a shorter request's tensors with their first element (`batching_util.h`), which for ids is
# [CLS] with mask 1, read as real tokens; its answer would move with what it was batched with. A
# text model's requests are one string a row, concatenated unpadded, tokenized in the graph.
BATCHING_PARAMS_FILE = "batching_params.pbtxt"
TEXT_BATCHING_PARAMS = """max_batch_size { value: 32 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 100 }
pad_variable_length_inputs: false
"""

SERVING_FILES = {
    # The batching threads TF Serving shares across models (`--batching_parameters_file`); with
    # per-model parameters on, a batched model's sizes come from its own `batching_params.pbtxt`
    # (TEXT_BATCHING_PARAMS). Where that flag is left off these apply to every model, padding
    # off: ids requests of different lengths batched together are refused rather than padded.
    "batching.config": """# TF Serving's batching threads (per-model sizes: each text model's batching_params.pbtxt).
max_batch_size { value: 32 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 4 }
pad_variable_length_inputs: false
""",
    # `docker compose up` in the base folder: gRPC on 8500, REST on 8501, every model of
    # models.config, the folder re-read every 60 s (a new export's version is picked up).
    "docker-compose.yml": f"""services:
  tensorflow-serving:
    image: {SERVING_IMAGE}
    ports:
      - "8500:8500"
      - "8501:8501"
    volumes:
      - ./:{{serving_base}}:ro
    command:
      - --port=8500
      - --rest_api_port=8501
      - --model_config_file={{serving_base}}/models.config
      - --model_config_file_poll_wait_seconds=60
      - --enable_batching=true
      - --enable_per_model_batching_parameters=true
      - --batching_parameters_file={{serving_base}}/batching.config
""",
}
