"""Why a local model did not load, in one clause the user can act on: what its folder lacks or
holds broken, never the loader's internal exception.

``transformers`` and ``diffusers`` fail on a partial or damaged folder with whatever their
loader trips on first: ``'NoneType' object has no attribute 'endswith'`` (no tokenizer files),
``'added_tokens'`` (a ``tokenizer.json`` that is no tokenizer), ``Error while deserializing
header`` (a truncated ``model.safetensors``), or a list of every model type they know (~5,000
characters). None of these names the folder's fault. The backends' ``load`` methods
(:mod:`~models_inference.backends.text`, :mod:`~models_inference.backends.vision`,
:mod:`~models_inference.backends.image`) call :func:`load_failure_cause` after a failed load, so
a model that loads pays nothing for it.

What a folder needs, per kind (:data:`KINDS`), as ``save_pretrained`` writes it:

* ``text`` (a causal LM): ``config.json`` with a ``model_type``, the weights (``*.safetensors``
  or ``*.bin``), the tokenizer files;
* ``image-to-text``: the same, and an image processor (``preprocessor_config.json``, or a
  ``processor_config.json`` that holds one);
* ``text-to-image`` (a ``diffusers`` pipeline): ``model_index.json`` and a sub-folder for every
  component it lists (a model component: its ``config.json`` and weights);
* ``component`` (e.g. a swapped VAE): ``config.json`` and the weights.

Every JSON file of the folder must parse, and every ``*.safetensors`` file must be as long as
its header says (the format: an 8-byte little-endian header length, a JSON header whose
``data_offsets`` end where the file does; https://github.com/huggingface/safetensors#format).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from ingestion.errors import shown

#: Files of which one makes a tokenizer (fast ``tokenizer.json``, SentencePiece, BPE / WordPiece vocabularies).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model")
#: Weight file patterns of ``save_pretrained`` (``transformers`` and ``diffusers``).
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
#: What each kind of model is called in a message.
KINDS = {
    "text": "causal language model",
    "image-to-text": "image-to-text model",
    "text-to-image": "text-to-image pipeline",
    "component": "model",
}


def _has_weights(folder: Path) -> bool:
    return any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS)


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _has_image_processor(folder: Path) -> bool:
    if (folder / "preprocessor_config.json").is_file():
        return True
    try:  # newer processors keep the image processor's settings inside processor_config.json
        return "image_processor" in json.loads((folder / "processor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def _json_problem(path: Path, base: Path) -> str | None:
    """Why ``path`` is not a JSON file (not UTF-8, not JSON), or None."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return f"its {shown(path.relative_to(base))} is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return f"its {shown(path.relative_to(base))} is not valid JSON (line {exc.lineno}, column {exc.colno})"
    except OSError:
        return f"its {shown(path.relative_to(base))} cannot be read"
    return None


def _safetensors_problem(path: Path, base: Path) -> str | None:
    """Why ``path`` is not a complete safetensors file (see the module docstring), or None."""
    name = shown(path.relative_to(base))
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"its {name} is not a safetensors file (shorter than its 8-byte header length)"
            (length,) = struct.unpack("<Q", head)
            if 8 + length > size:
                return f"its {name} is truncated: shorter than its own header says"
            header = json.loads(fh.read(length))
    except OSError:
        return f"its {name} cannot be read"
    except (ValueError, UnicodeDecodeError):
        return f"its {name} is not a safetensors file (its header is not JSON)"
    if not isinstance(header, dict):
        return f"its {name} is not a safetensors file (its header is not JSON)"
    ends = [
        t["data_offsets"][1]
        for k, t in header.items()
        if k != "__metadata__" and isinstance(t, dict) and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2
    ]
    if ends and 8 + length + max(ends) > size:
        return f"its {name} is truncated: its header lists {max(ends):,} bytes of tensors, the file holds {size - 8 - length:,}"
    return None


def _model_type(folder: Path) -> str | None:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def _component_problems(folder: Path, base: Path) -> list[str]:
    """What a model component folder (``config.json`` and weights) lacks, relative to ``base``."""
    missing = [what for what, present in (("config.json", (folder / "config.json").is_file()), ("weights", _has_weights(folder))) if not present]
    if not missing:
        return []
    where = f"{shown(folder.relative_to(base))}/ " if folder != base else ""
    return [f"{where}has no {', no '.join(missing)}"]


def _pipeline_missing(folder: Path) -> list[str]:
    """What a ``diffusers`` pipeline folder lacks: ``model_index.json``, or a component it lists."""
    if not (folder / "model_index.json").is_file():
        return ["has no model_index.json"]
    try:
        index = json.loads((folder / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # reported as invalid JSON
    found = []
    for name, spec in index.items():
        if name.startswith("_") or not isinstance(spec, list) or len(spec) != 2 or spec[0] is None:
            continue  # metadata, or an optional component left out (safety_checker: [null, null])
        sub = folder / name
        if not sub.is_dir():
            found.append(f"has no {shown(name)}/ (model_index.json lists it)")
        elif any(word in str(spec[1]) for word in ("Tokenizer", "Scheduler", "Processor", "FeatureExtractor")):
            if not any(sub.glob("*.json")) and not any(sub.glob("*.txt")):
                found.append(f"{shown(name)}/ holds no configuration file")
        else:
            found += _component_problems(sub, folder)
    return found


def folder_problem(folder: Path, kind: str) -> str | None:
    """What the model folder ``folder`` of ``kind`` (a key of :data:`KINDS`) lacks or holds
    broken, as one clause (``"the folder has no config.json, no weights"``, ``"its
    model.safetensors is truncated: ..."``), or None when every part is there and each JSON
    and safetensors file is whole.

    Raises:
        KeyError: ``kind`` is not a key of :data:`KINDS`.
    """
    folder = Path(folder)
    KINDS[kind]  # noqa: B018 - an unknown kind is the caller's mistake
    if kind == "text-to-image":
        missing = _pipeline_missing(folder)
    else:
        parts = [("config.json", (folder / "config.json").is_file()), ("weights", _has_weights(folder))]
        if kind in ("text", "image-to-text"):
            parts.append(("tokenizer", _has_tokenizer(folder)))
        if kind == "image-to-text":
            parts.append(("image processor (preprocessor_config.json)", _has_image_processor(folder)))
        absent = [what for what, present in parts if not present]
        missing = [f"has no {', no '.join(absent)}"] if absent else []
    if missing:
        return "the folder " + "; ".join(missing)
    for path in sorted(folder.rglob("*.json")):
        problem = _json_problem(path, folder)
        if problem:
            return problem
    for path in sorted(folder.rglob("*.safetensors")):
        problem = _safetensors_problem(path, folder)
        if problem:
            return problem
    if kind in ("text", "image-to-text") and _model_type(folder) is None:
        return "its config.json names no model_type"
    if kind in ("text", "image-to-text") and (folder / "tokenizer.json").is_file() and not _is_tokenizer_json(folder):
        return "its tokenizer.json holds no tokenizer (no model section)"
    return None


def _is_tokenizer_json(folder: Path) -> bool:
    """Whether ``tokenizer.json`` (valid JSON, checked before) is a ``tokenizers`` file: an object with a ``model``."""
    try:
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("model"), dict)


#: What a failing loader step was reading, in a message: the part named by the backend.
_PARTS = {
    "tokenizer": "its tokenizer files ({files}) cannot be loaded: they are incomplete or not a tokenizer of this model",
    "processor": "its processor files ({files}) cannot be loaded: they are incomplete or not this model's",
    "weights": "its weights ({files}) cannot be loaded: incomplete, corrupt, or not this model's",
    "pipeline": "its components cannot be loaded: a file is incomplete, corrupt, or not of this pipeline",
}
#: Files named for each part, when present.
_PART_FILES = {
    "tokenizer": (*TOKENIZER_FILES, "tokenizer_config.json"),
    "processor": ("processor_config.json", "preprocessor_config.json", *TOKENIZER_FILES, "tokenizer_config.json"),
}


def _first_sentence(exc: BaseException) -> str:
    """The first sentence of ``exc``'s message (at most 200 characters): for a hub id, the
    loader says whether it is cached or not found."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".")
    return first if len(first) <= 200 else first[:197] + "..."


def load_failure_cause(model_ref: str, kind: str, exc: BaseException, part: str | None = None) -> str:
    """Why ``model_ref`` of ``kind`` (a key of :data:`KINDS`) did not load, as one clause.

    For a local folder: :func:`folder_problem`; else a model type the loader does not take
    for ``kind`` (``"its config.json describes a 'clip' model, not a causal language model"``);
    else the ``part`` that was loading when it failed (``"tokenizer"``, ``"processor"``,
    ``"weights"``, ``"pipeline"``), with its files. For anything else (a hub id), the first
    sentence of the loader's message when it is an ``OSError`` / ``ValueError`` (not found,
    not cached), else the part and the exception's class only.

    Args:
        model_ref: the ``--model`` value (a folder, a file, a hub id).
        exc: what the loader raised. part: what it was loading (None: unknown).
    """
    folder = Path(model_ref).expanduser()
    noun = KINDS[kind]
    text = str(exc)
    if folder.is_dir():
        problem = folder_problem(folder, kind)
        if problem:
            return problem
        if "Unrecognized configuration class" in text:  # e.g. a CLIP folder given as a causal LM
            article = "an" if noun[0] in "aeiou" else "a"
            return f"its config.json describes a {shown(_model_type(folder), quote=True)} model, not {article} {noun}"
        if part == "weights" and "size mismatch" in text:
            return "its weights do not fit the shapes its config.json gives (another model's weights?)"
        if part in _PARTS:
            files = [name for name in _PART_FILES.get(part, ()) if (folder / name).is_file()]
            if part == "weights":
                files = sorted(p.name for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern))
            names = ", ".join(shown(name) for name in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            return _PARTS[part].format(files=names or "none found")
    if isinstance(exc, (OSError, ValueError)) and not isinstance(exc, UnicodeError):  # a decoding error's text is internal
        return _first_sentence(exc)
    what = f"its {part}" if part else "it"
    return f"the loader failed while reading {what} ({type(exc).__name__})"


__all__ = ["KINDS", "TOKENIZER_FILES", "WEIGHT_PATTERNS", "folder_problem", "load_failure_cause"]
