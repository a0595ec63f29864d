"""Checkpoints by Hugging Face Hub name, wherever a checkpoint folder is taken.

`"org/name"`, `"hf://org/name"`, either with `"@revision"` (a branch, tag or commit), names a model
on the Hub: `huggingface_hub` finds it in its cache or downloads it there (its `HF_HUB_CACHE`,
`HF_HUB_OFFLINE` and token, read as it reads them), and the loaders read the cached folder. A local
file or folder of that name wins. Only the files the loaders read are downloaded (configs,
safetensors weights, tokenizer files, sentence-transformers' module folders), not a repository's
PyTorch, ONNX or other copies.
"""

import os
import re

__all__ = ["HUB_PREFIX", "hub_name", "local_or_hub"]

HUB_PREFIX = "hf://"
# A Hub model id: "org/name" (letters, digits, "-", "_", "."), as the Hub allows.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]*[\w]$")
# What the loaders read of a repository; its other copies (PyTorch, ONNX, OpenVINO) stay on the Hub.
FILES_READ = ("*.json", "*.txt", "*.model", "*.safetensors", "*/*.json", "*/*.safetensors", "*/*.txt")


def hub_name(source: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) where `source` reads as a Hub name and is no local path, else None."""
    text = os.fspath(source)
    if not text.startswith(HUB_PREFIX) and os.path.exists(text):
        return None
    name = text[len(HUB_PREFIX) :] if text.startswith(HUB_PREFIX) else text
    repo_id, _, revision = name.partition("@")
    return (repo_id, revision or None) if _REPO_ID.match(repo_id) else None


def local_or_hub(source: str) -> str:
    """`source` where it is a local path (or reads as no Hub name: the caller reports it missing);
    else the folder of the Hub model it names, in huggingface_hub's cache (downloaded unless the
    Hub cannot be reached). A Hub name that can be neither found nor downloaded is one
    `FileNotFoundError` line naming the cache and why."""
    named = hub_name(source)
    if named is None:
        return os.fspath(source)
    repo_id, revision = named
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(FILES_READ))
    except LocalEntryNotFoundError:
        cache = huggingface_hub.constants.HF_HUB_CACHE
        offline = " (HF_HUB_OFFLINE is set)" if huggingface_hub.constants.is_offline_mode() else ""
        raise FileNotFoundError(
            f"{source} is no local path, and the Hub model {repo_id}"
            f"{'@' + revision if revision else ''} is not in the Hugging Face cache ({cache}) while the Hub "
            f"cannot be reached{offline}: download it once online, or give its folder."
        ) from None
    except RevisionNotFoundError:
        raise FileNotFoundError(f"{source}: the Hub model {repo_id} has no revision {revision!r}.") from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"{source} is no local path, and the Hub has no model {repo_id} that this login may read (a private "
            "or gated one needs `hf auth login` or HF_TOKEN)."
        ) from None
