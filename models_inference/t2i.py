"""The T2I probe: images per descriptor (BiasDora Section 2.2, Appendix A.9; METHOD.md section 2).

For each descriptor x T2I setting (singular, plural) x image index 1..K, one image is
generated from "Generate an image of a/an <descriptor>" / "Generate an image of
<descriptors>" (prompts: :mod:`models_inference.prompts`; descriptor phrases: the paper's
``ingestion/data/biasdora/t2i_setting1.csv`` / ``t2i_setting2.csv``). Paper: K = 10.

Two backends, one interface (:class:`ImageBackend`):

* :class:`DiffusersImageBackend`: a ``diffusers`` text-to-image pipeline by hub id or local
  folder (paper: Stable Diffusion, DPMSolverMultistepScheduler, 20 steps, VAE swapped for
  ``stabilityai/sd-vae-ft-mse``), fp16 on GPU / fp32 on CPU, batched, one seeded
  ``torch.Generator`` per image so an image depends on its seed, not on its batch.
* :class:`OpenAIImagesBackend`: the OpenAI Images API (paper: DALL-E 3, 1024x1024, standard
  quality, vivid and natural styles) through the official ``openai`` client, any base URL.

Images are stored content-addressed as PNG at ``$DORA_HOME/images/<sha[:2]>/<sha256>.png``
(:func:`store_png`): the file name is the hash of the bytes, never derived from descriptor
text, so no descriptor ("../../etc/passwd", "a/b") can steer a path. One metadata row per
image lands in ``landing/t2i_images`` (:data:`ingestion.landing.SCHEMAS`), whatever its
status. Rows are keyed by (audit_id, setting, descriptor, image_index); a re-run generates
only the keys without an ``ok`` / ``filtered`` / ``refused`` row, so an interrupted audit
resumes and failed calls are retried.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ingestion.landing import dora_home
from models_inference.prompts import T2I_SETTINGS, render_t2i_prompt
from models_inference.resumable import AuditInfo, ResumableTable, model_columns, run_resumable
from models_inference.t2t import narrow_descriptors
from models_inference.text_backends import ModelNotAvailableError, api_error_text, map_concurrently, openai_client

#: Image statuses that count as done (a re-run does not regenerate them).
FINAL_IMAGE_STATUSES = ("ok", "filtered", "refused")
#: Where image rows land; a (setting, descriptor, image_index) key is done once it has a
#: row with a final status (``error`` rows are retried).
T2I_TABLE = ResumableTable(
    "t2i_images", ("setting", "descriptor", "descriptor_row", "image_index"), "status", FINAL_IMAGE_STATUSES,
    unit="image", null_defaults=(("descriptor_row", 1),),
)
#: The paper's Stable Diffusion settings (BiasDora Section 4 / METHOD.md section 2).
PAPER_SD_STEPS = 20
PAPER_SD_VAE = "stabilityai/sd-vae-ft-mse"
#: The paper's Stable Diffusion model (seed 004, Appendix "Generation settings").
PAPER_SD_MODEL = "stabilityai/stable-diffusion-2-inpainting"
#: The style suffix the paper's code appends to every Stable Diffusion prompt, verbatim
#: (METHOD.md 3a: immediately after the T2I prompt, no separating space; note the double
#: space before the second "--beta"). Issue 11.
PAPER_SD_PROMPT_SUFFIX = (
    "50mm photography, hard rim lighting photography --beta --ar 2:3  --beta --upbeta 0.1 "
    "--upnoise 0.1 --upalpha 0.1 --upgamma 0.1 --upsteps 20"
)
#: The paper's DALL-E 3 settings.
PAPER_DALLE_SIZE = "1024x1024"
PAPER_DALLE_QUALITY = "standard"
PAPER_DALLE_STYLES = ("vivid", "natural")


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class T2ITarget:
    """One descriptor in one T2I setting.

    Attributes:
        setting: ``singular`` or ``plural``.
        descriptor: the descriptor key (:func:`ingestion.descriptors.normalise_descriptor` of
            the phrase), the same key T2T uses.
        bias_dimension: CrowS-Pairs bias dimension the CSV lists it under.
        phrase: the descriptor as the CSV writes it ("Child", "Old people").
        prompt: the rendered image prompt (:func:`models_inference.prompts.render_t2i_prompt`).
        descriptor_row: k-th row of this descriptor key in the setting's CSV (a probe unit is a
            row of the paper's lists, METHOD.md section 1: 344 rows per setting).
    """

    setting: str
    descriptor: str
    bias_dimension: str
    phrase: str
    prompt: str
    descriptor_row: int = 1


# The T2I CSVs spell bias types with spaces ("race color", "socioeconomic status").
_DIMENSION_ALIASES = {"socioeconomic status": "socioeconomic"}


def curated_t2i_targets(settings: Sequence[str] = T2I_SETTINGS, folder: str | Path | None = None) -> list[T2ITarget]:
    """The T2I targets of the paper, from ``t2i_setting1.csv`` (singular) / ``t2i_setting2.csv`` (plural).

    Source: the CSVs published with BiasDora (seed 004, Appendix A.9), columns
    ``template_singular,target,bias_type,target_singular`` and
    ``template_plural,target,bias_type,target_plural``; their bias types are spelled with
    spaces ("race color", "socioeconomic status") and mapped to the CrowS-Pairs names
    ("race-color", "socioeconomic"). The paper's T2I lists have no gender rows (8 of the 9
    dimensions; the bridge ``int_descriptor_dimensions`` adds gender etc. from
    ``bias_target_mapping.json``). The phrase is ``target_singular`` /
    ``target_plural``; its key is :func:`~ingestion.descriptors.normalise_descriptor` (so
    "Old people" and "Old person" are both "old person", T2T's key). Every row is a probe
    unit (METHOD.md section 1); repeats of a key are numbered by ``descriptor_row``.

    Returns:
        Targets in settings order, then file order (344 per setting for the shipped files,
        312 descriptor keys).

    Raises:
        ValueError: unknown setting, missing columns, an unknown bias_type or an empty phrase
            (the message names the file and line). FileNotFoundError: a CSV is missing.
    """
    from ingestion.crows_pairs import BIAS_DIMENSIONS
    from ingestion.descriptors import default_biasdora_dir, normalise_descriptors

    unknown = [s for s in settings if s not in T2I_SETTINGS]
    if unknown:
        raise ValueError(f"unknown T2I setting(s) {unknown}; expected some of {T2I_SETTINGS}")
    folder = Path(folder) if folder is not None else default_biasdora_dir()
    out: list[T2ITarget] = []
    for setting in settings:
        path = folder / f"t2i_setting{T2I_SETTINGS.index(setting) + 1}.csv"
        column = f"target_{setting}"
        if not path.is_file():
            raise FileNotFoundError(f"T2I template file not found: {path}")
        rows: list[tuple[str, str]] = []
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            if not {"bias_type", column} <= set(reader.fieldnames or ()):
                raise ValueError(f"{path.name} line 1: expected columns bias_type,{column}")
            for row in reader:
                dim = _DIMENSION_ALIASES.get(raw := " ".join((row["bias_type"] or "").lower().split()), raw.replace(" ", "-"))
                if dim not in BIAS_DIMENSIONS:
                    raise ValueError(f"{path.name} line {reader.line_num}: unknown bias_type {dim!r}")
                phrase = " ".join((row[column] or "").split()).rstrip(".")
                if not phrase:
                    raise ValueError(f"{path.name} line {reader.line_num}: empty {column}")
                rows.append((dim, phrase))
        keys = normalise_descriptors(p for _, p in rows)
        seen: dict[str, int] = {}
        for (dim, phrase), key in zip(rows, keys):
            seen[key] = seen.get(key, 0) + 1
            out.append(T2ITarget(setting, key, dim, phrase, render_t2i_prompt(phrase, setting), seen[key]))
    return out


def custom_t2i_target(descriptor: str, setting: str, bias_dimension: str = "unknown", phrase: str | None = None) -> T2ITarget:
    """A target for any descriptor text (the key is used as written, lower-cased and trimmed).

    Used for descriptors outside the paper's CSVs; the text goes only into the prompt and
    the landed row, never into a file name.
    """
    key = " ".join(descriptor.split()).lower()
    if not key:
        raise ValueError("empty descriptor")
    phrase = phrase or key
    return T2ITarget(setting, key, bias_dimension, phrase, render_t2i_prompt(phrase, setting))


def select_t2i_targets(
    targets: Sequence[T2ITarget],
    *,
    settings: Sequence[str] = T2I_SETTINGS,
    descriptors: Sequence[str] = (),
    per_dimension: int = 0,
) -> list[T2ITarget]:
    """Choose the targets an audit draws (as :func:`models_inference.t2t.select_targets`).

    Args:
        settings: T2I settings to keep.
        descriptors: descriptor keys to keep (empty = all).
        per_dimension: the first k descriptors of each bias dimension (file order) among those
            present in every kept setting; 0 keeps all.

    Raises:
        ValueError: an unknown setting, a requested descriptor that does not exist, or an
            empty selection.
    """
    unknown = [s for s in settings if s not in T2I_SETTINGS]
    if unknown:
        raise ValueError(f"unknown T2I setting(s) {unknown}; expected some of {T2I_SETTINGS}")
    kept = narrow_descriptors(
        [t for t in targets if t.setting in settings], descriptors, per_dimension,
        normalise=lambda d: " ".join(d.split()).lower(), list_name="the T2I descriptor list",
    )
    if not kept:
        raise ValueError("the T2I descriptor selection is empty: nothing to draw")
    return kept


# ----------------------------------------------------------------------------- image store


def images_dir() -> Path:
    """``$DORA_HOME/images`` (created)."""
    folder = dora_home() / "images"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True)
class StoredImage:
    """Where :func:`store_png` put an image: ``path`` relative to ``$DORA_HOME``."""

    path: str
    sha256: str
    width: int
    height: int


def store_png(data: bytes) -> StoredImage:
    """Store image bytes content-addressed as PNG: ``images/<sha[:2]>/<sha256>.png``.

    The bytes are decoded with Pillow (fully loaded, so truncated data fails here); a PNG is
    kept byte for byte, any other format (JPEG, WebP) is re-encoded as PNG first. The file
    name is the sha256 of the stored PNG bytes, so identical images share one file and no
    caller text reaches the path. Written atomically (temp file + rename).

    Returns:
        A :class:`StoredImage` (path relative to ``$DORA_HOME``, sha256 hex, size in pixels).

    Raises:
        ValueError: the bytes are not a decodable image.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            fmt, size = img.format, img.size
            if fmt != "PNG":
                buf = io.BytesIO()
                img.save(buf, format="PNG")
                data = buf.getvalue()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"not a decodable image ({len(data)} bytes): {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    folder = images_dir() / digest[:2]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{digest}.png"
    if not target.exists():
        tmp = folder / f".{digest}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    return StoredImage(f"images/{digest[:2]}/{digest}.png", digest, int(size[0]), int(size[1]))


def image_file(relative_path: str) -> Path:
    """Absolute path of a stored image from its landed ``image_path``.

    Raises:
        ValueError: the path would leave ``$DORA_HOME/images`` (e.g. a tampered row).
    """
    root = images_dir().resolve()
    path = (dora_home() / relative_path).resolve()
    if root not in path.parents:
        raise ValueError(f"image path {relative_path!r} is outside {root}")
    return path


def png_bytes(image) -> bytes:
    """PNG bytes of a PIL image (no metadata, so equal pixels give equal bytes)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


# ----------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class ImageRequest:
    """One image to draw: ``prompt``, per-image ``seed`` (int64) and its ``image_index`` (1-based)."""

    prompt: str
    seed: int
    image_index: int = 1


@dataclass(frozen=True)
class ImageResult:
    """One backend answer.

    Attributes:
        data: the image bytes (PNG from diffusers; whatever the API sent otherwise), or None.
        status: ``ok``, ``filtered`` (a safety checker replaced the image), ``refused`` (the
            API declined the prompt: final, not retried) or ``error`` (retried next run).
        error: the error message when not ``ok``.
        revised_prompt: the prompt the API says it drew (DALL-E 3), else None.
        style: the style requested (DALL-E 3), else None.
    """

    data: bytes | None
    status: str = "ok"
    error: str | None = None
    revised_prompt: str | None = None
    style: str | None = None


class ImageBackend(Protocol):
    """What a T2I backend provides; ``generate`` returns one result per request, in order."""

    backend_name: str
    model_id: str
    model_version: str

    def generation_params(self) -> dict: ...

    def generate(self, requests: Sequence[ImageRequest], on_batch: Callable[[int], None] | None = None) -> list[ImageResult]: ...


def folder_fingerprint(folder: Path, edge: int = 1 << 20) -> str:
    """A sha256 fingerprint of a local model folder (its version when it has no hub revision).

    Covers every file's relative path and size, the full bytes of files up to ``2 * edge``
    bytes (configs, tokenizers) and the first and last ``edge`` bytes of larger ones
    (weights), so multi-GB checkpoints are fingerprinted in milliseconds.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and not p.name.startswith(".")):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with open(path, "rb") as fh:
            if size <= 2 * edge:
                digest.update(fh.read())
            else:
                digest.update(fh.read(edge))
                fh.seek(size - edge)
                digest.update(fh.read(edge))
    return digest.hexdigest()


def hub_snapshot(model_ref: str) -> Path | None:
    """The local snapshot folder of a hub id already in the Hugging Face cache, else None."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_ref, local_files_only=True))
    except Exception:  # not cached, not a repo id, offline: not reachable from the cache
        return None


def local_model_version(model_ref: str) -> str:
    """Version of a model reference: the hub revision (commit) if cached, else a folder fingerprint."""
    if Path(model_ref).exists():
        return "local-" + folder_fingerprint(Path(model_ref))[:12]
    snap = hub_snapshot(model_ref)
    return snap.name if snap is not None else "unknown"


def model_reachable(model_ref: str | None, backend: str, *, api_key_env: str = "OPENAI_API_KEY") -> tuple[bool, str]:
    """Can ``model_ref`` be used here without downloading anything?

    Local backends (``diffusers``, ``transformers``): a local folder, or a hub id already in the
    Hugging Face cache (or any hub id when ``HF_HUB_OFFLINE`` is not set, since the hub may then
    be reachable). API backend (``openai``): the API key variable is set.

    Returns:
        ``(True, "")`` or ``(False, reason)`` with a sentence saying why.
    """
    if not model_ref:
        return False, "no model configured"
    if backend == "openai":
        if os.environ.get(api_key_env):
            return True, ""
        return False, f"{api_key_env} is not set"
    if Path(model_ref).exists():
        return True, ""
    if hub_snapshot(model_ref) is not None:
        return True, ""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("1", "true", "yes"):
        return True, ""
    return False, f"{model_ref!r} is not a local folder and not in the Hugging Face cache (HF_HUB_OFFLINE is set)"


@dataclass
class DiffusersImageBackend:
    """A ``diffusers`` text-to-image pipeline (paper: Stable Diffusion). Build with :meth:`load`.

    Attributes:
        steps: denoising steps (paper: 20). guidance_scale: classifier-free guidance (7.5,
            the Stable Diffusion default). height / width: pixels (None = the model's default,
            512 for SD 1.x). batch_size: images per pipeline call. scheduler: the scheduler
            class in use (paper: DPMSolverMultistepScheduler).
    """

    model_id: str
    model_version: str
    pipeline: object = field(repr=False)
    steps: int = PAPER_SD_STEPS
    guidance_scale: float = 7.5
    height: int | None = None
    width: int | None = None
    batch_size: int = 4
    vae: str | None = None
    scheduler: str = "DPMSolverMultistepScheduler"
    device: str = "cpu"
    dtype: str = "float32"
    backend_name: str = "diffusers"
    prompt_suffix: str = ""

    @classmethod
    def load(
        cls,
        model_ref: str,
        *,
        vae: str | None = None,
        steps: int = PAPER_SD_STEPS,
        guidance_scale: float = 7.5,
        height: int | None = None,
        width: int | None = None,
        batch_size: int = 4,
        device: str | None = None,
        dpm_solver: bool = True,
        prompt_suffix: str = "",
    ) -> "DiffusersImageBackend":
        """Load a pipeline by hub id or local folder; swap in DPMSolverMultistep and the VAE.

        fp16 on CUDA, fp32 on CPU. The version is the hub revision (cache snapshot) or a
        fingerprint of the local folder, plus the VAE's when it is swapped.

        Args:
            model_ref: a local folder saved with ``save_pretrained`` or a hub id (offline: only
                if already cached), e.g. ``runwayml/stable-diffusion-v1-5``.
            vae: an ``AutoencoderKL`` to use instead of the pipeline's (paper:
                ``stabilityai/sd-vae-ft-mse``); None keeps the pipeline's VAE.
            dpm_solver: replace the scheduler by ``DPMSolverMultistepScheduler`` built from
                the pipeline's scheduler config (paper).
            prompt_suffix: text appended to every prompt, with no separating space (paper:
                :data:`PAPER_SD_PROMPT_SUFFIX`); recorded in every row's ``prompt``.

        Raises:
            ModelNotAvailableError: the pipeline or VAE cannot be loaded here.
        """
        import torch
        from diffusers import AutoencoderKL, AutoPipelineForText2Image, DPMSolverMultistepScheduler

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        try:
            pipe = AutoPipelineForText2Image.from_pretrained(model_ref, torch_dtype=dtype)
            if vae:
                pipe.vae = AutoencoderKL.from_pretrained(vae, torch_dtype=dtype)
        except (OSError, ValueError, EnvironmentError) as exc:
            raise ModelNotAvailableError(
                f"cannot load text-to-image model {model_ref!r}" + (f" / VAE {vae!r}" if vae else "")
                + f" here: {exc}. Use a local folder (save_pretrained) or a hub id already in the "
                "Hugging Face cache, or unset HF_HUB_OFFLINE on a machine with hub access."
            ) from exc
        if dpm_solver:
            pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
        pipe = pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        version = local_model_version(model_ref)
        if vae:
            version += "+vae-" + local_model_version(vae)[:18]
        return cls(
            model_id=model_ref,
            model_version=version,
            pipeline=pipe,
            steps=steps,
            guidance_scale=guidance_scale,
            height=height,
            width=width,
            batch_size=batch_size,
            vae=vae,
            scheduler=type(pipe.scheduler).__name__,
            device=device,
            dtype=str(dtype).replace("torch.", ""),
            prompt_suffix=prompt_suffix or "",
        )

    def generation_params(self) -> dict:
        """The parameters that change what an image means (part of the audit id and each row)."""
        return {
            "steps": self.steps,
            "guidance_scale": self.guidance_scale,
            "height": self.height,
            "width": self.width,
            "scheduler": self.scheduler,
            "vae": self.vae,
            "dtype": self.dtype,
            "safety_checker": getattr(self.pipeline, "safety_checker", None) is not None,
            **({"prompt_suffix": self.prompt_suffix} if self.prompt_suffix else {}),  # only when set: ids stay
        }

    def generate(self, requests, on_batch=None):
        """Draw ``requests`` in batches of ``batch_size``; each image from its own CPU generator.

        A failing batch becomes ``error`` results for its requests (retried next run).
        """
        import torch

        results: list[ImageResult] = []
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start : start + self.batch_size])
            generators = [torch.Generator("cpu").manual_seed(int(r.seed) % (2**63)) for r in batch]
            try:
                with torch.inference_mode():
                    out = self.pipeline(
                        prompt=[r.prompt for r in batch],
                        num_inference_steps=self.steps,
                        guidance_scale=self.guidance_scale,
                        height=self.height,
                        width=self.width,
                        generator=generators,
                        output_type="pil",
                    )
            except (RuntimeError, ValueError) as exc:
                msg = f"{type(exc).__name__}: {exc}"
                results.extend(ImageResult(None, "error", msg) for _ in batch)
            else:
                flags = getattr(out, "nsfw_content_detected", None) or [False] * len(batch)
                for image, flagged in zip(out.images, flags):
                    status = "filtered" if flagged else "ok"
                    results.append(ImageResult(png_bytes(image), status, "safety checker flagged the image" if flagged else None))
            if on_batch:
                on_batch(len(batch))
        return results


@dataclass
class OpenAIImagesBackend:
    """The OpenAI Images API (paper: DALL-E 3) or any compatible endpoint, via ``openai``.

    Image i of a descriptor is drawn in style ``styles[(i - 1) % len(styles)]``, so the
    paper's "vivid and natural" splits each descriptor's images evenly between the two
    styles (vivid first). The key is read from ``api_key_env`` at call time, never stored:
    error texts are redacted (:func:`models_inference.text_backends.redact`), since some
    servers quote the key in them. Retries on 429/5xx/timeouts are the client's own
    (``max_retries``); a 400 (content policy) is ``refused`` and final, other errors are
    retried on the next run.

    Attributes:
        size, quality, styles: request fields (paper: 1024x1024, standard, vivid + natural);
            an empty ``styles`` sends no style (models without one, e.g. gpt-image-1).
        concurrency: requests in flight at once.
    """

    model_id: str = "dall-e-3"
    base_url: str | None = None
    size: str = PAPER_DALLE_SIZE
    quality: str | None = PAPER_DALLE_QUALITY
    styles: tuple[str, ...] = PAPER_DALLE_STYLES
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 4
    timeout: float = 120.0
    concurrency: int = 4
    model_version: str = ""
    backend_name: str = "openai"

    def __post_init__(self):
        self.model_version = self.model_version or self.model_id
        self.styles = tuple(self.styles)

    def generation_params(self) -> dict:
        return {"size": self.size, "quality": self.quality, "styles": list(self.styles), "n": 1}

    def style_for(self, image_index: int) -> str | None:
        """The style of the ``image_index``-th image (1-based) of a descriptor."""
        return self.styles[(image_index - 1) % len(self.styles)] if self.styles else None

    def generate(self, requests, on_batch=None):
        """One ``images.generate`` call per request (n=1, ``b64_json``); errors become results.

        Raises:
            ModelNotAvailableError: the API key variable is unset.
        """
        import openai

        client = openai_client(self.api_key_env, self.base_url, max_retries=self.max_retries, timeout=self.timeout)
        key = client.api_key

        def one(req: ImageRequest) -> ImageResult:
            style = self.style_for(req.image_index)
            kwargs = {"model": self.model_id, "prompt": req.prompt, "n": 1, "size": self.size, "response_format": "b64_json"}
            if self.quality:
                kwargs["quality"] = self.quality
            if style:
                kwargs["style"] = style
            try:
                resp = client.images.generate(**kwargs)
            except openai.BadRequestError as exc:  # content policy: the API will not draw it
                return ImageResult(None, "refused", api_error_text(exc, key), style=style)
            except openai.OpenAIError as exc:  # the key-quoting proxy case: never stored
                return ImageResult(None, "error", api_error_text(exc, key), style=style)
            item = resp.data[0] if resp.data else None
            if item is None or not item.b64_json:
                return ImageResult(None, "error", "the response carries no b64_json image", style=style)
            try:
                data = base64.b64decode(item.b64_json, validate=True)
            except ValueError as exc:
                return ImageResult(None, "error", f"invalid base64 image: {exc}", style=style)
            return ImageResult(data, "ok", None, getattr(item, "revised_prompt", None), style)

        return map_concurrently(one, requests, self.concurrency, on_batch)


T2I_BACKENDS = ("diffusers", "openai")


def load_image_backend(model: str, *, backend: str = "diffusers", **kwargs) -> ImageBackend:
    """Build a T2I backend by name: ``diffusers`` (local pipeline) or ``openai`` (Images API).

    Raises:
        ValueError: unknown backend. ModelNotAvailableError: the model cannot be loaded.
    """
    if backend == "diffusers":
        return DiffusersImageBackend.load(model, **kwargs)
    if backend == "openai":
        return OpenAIImagesBackend(model_id=model, **kwargs)
    raise ValueError(f"unknown T2I backend {backend!r}; expected one of {T2I_BACKENDS}")


# ----------------------------------------------------------------------------- the probe


@dataclass
class T2IProbeConfig:
    """Parameters of a T2I probe run.

    Attributes:
        images_per_descriptor: images per (descriptor, setting) (paper: 10).
        shard_rows: images per landed Parquet shard (at most this much work is lost on a crash).
    """

    images_per_descriptor: int = 10
    shard_rows: int = 16

    def validate(self) -> "T2IProbeConfig":
        if self.images_per_descriptor < 1:
            raise ValueError(f"images_per_descriptor must be >= 1, got {self.images_per_descriptor}")
        if self.shard_rows < 1:
            raise ValueError(f"shard_rows must be >= 1, got {self.shard_rows}")
        return self


@dataclass
class T2IRunSummary:
    """What a T2I run did: images planned, already landed, generated, by status."""

    audit_id: str
    planned: int = 0
    already_landed: int = 0
    generated: int = 0
    status: Counter = field(default_factory=Counter)


def slug(text: str, limit: int = 40) -> str:
    """Lower-case ``[a-z0-9._-]`` form of a model name for readable audit ids."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text.lower()).strip("-")[:limit] or "model"


def image_audit_id_for(backend: ImageBackend) -> str:
    """Deterministic image audit id ``t2i-<model>-<version>-<hash8>``.

    The hash covers backend, model, version and :meth:`generation_params`; the same model
    drawn with the same parameters extends the same audit (more descriptors, more images).
    """
    payload = {"backend": backend.backend_name, "model": backend.model_id, "version": backend.model_version,
               **backend.generation_params()}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    version = backend.model_version.split("+")[0]  # the hash covers the VAE part
    return f"t2i-{slug(backend.model_id.rstrip('/').split('/')[-1])}-{slug(version, 20)}-{digest[:8]}"


def image_seed(audit_id: str, setting: str, descriptor: str, image_index: int, descriptor_row: int = 1) -> int:
    """Per-image seed: 63-bit blake2b of the row key (stable across machines and batches);
    a descriptor's later rows (``descriptor_row`` > 1) add the row to the key."""
    row = f"|row{descriptor_row}" if descriptor_row != 1 else ""
    key = f"{audit_id}|t2i|{setting}|{descriptor}{row}|{image_index}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


def run_t2i_probe(
    targets: Sequence[T2ITarget],
    backend: ImageBackend,
    config: T2IProbeConfig | None = None,
    *,
    audit_id: str | None = None,
    progress: bool = True,
) -> T2IRunSummary:
    """Generate, store and land every missing image for ``targets``.

    Args:
        targets: descriptor x setting prompts (:func:`curated_t2i_targets`).
        backend: an :class:`ImageBackend`.
        config: :class:`T2IProbeConfig` (default: 10 images per descriptor and setting).
        audit_id: override :func:`image_audit_id_for`.
        progress: tqdm bar on stderr.

    Returns:
        A :class:`T2IRunSummary`. Rows land in shards of ``config.shard_rows``
        (:func:`models_inference.resumable.run_resumable`); images that failed land as
        ``error`` rows (no file) and are retried by the next run. The audit gets ``started``
        / ``finished`` events, or ``failed`` (then the exception is re-raised).

    Raises:
        ValueError: invalid config or a target with an unknown setting.
        ModelNotAvailableError: the backend cannot run (e.g. API key unset).
    """
    cfg = (config or T2IProbeConfig()).validate()
    audit_id = audit_id or image_audit_id_for(backend)
    for t in targets:
        if t.setting not in T2I_SETTINGS:
            raise ValueError(f"unknown T2I setting {t.setting!r} for descriptor {t.descriptor!r}")
    params = backend.generation_params()
    params_json = json.dumps(params, sort_keys=True, default=str)

    def generate(chunk: list[tuple[T2ITarget, int]], advance: Callable[[int], None]) -> list[dict]:
        suffix = getattr(backend, "prompt_suffix", "") or ""  # the paper's SD style suffix, no space
        requests = [ImageRequest(t.prompt + suffix, image_seed(audit_id, t.setting, t.descriptor, i, t.descriptor_row), i)
                    for t, i in chunk]
        results = backend.generate(requests, on_batch=advance)
        now = datetime.now(timezone.utc)
        rows = []
        for (t, index), req, res in zip(chunk, requests, results):
            stored, status, error = None, res.status, res.error
            if res.data is not None:
                try:
                    stored = store_png(res.data)
                except ValueError as exc:
                    status, error = "error", str(exc)
            elif status in ("ok", "filtered"):
                status, error = "error", error or "the backend returned no image"
            rows.append(
                {
                    **model_columns(audit_id, backend),
                    "setting": t.setting,
                    "descriptor": t.descriptor,
                    "bias_dimension": t.bias_dimension,
                    "descriptor_row": t.descriptor_row,
                    "image_index": index,
                    "seed": req.seed,
                    "prompt": req.prompt,
                    "revised_prompt": res.revised_prompt,
                    "style": res.style,
                    "generation_params": params_json,
                    "image_path": stored.path if stored else None,
                    "sha256": stored.sha256 if stored else None,
                    "width": stored.width if stored else None,
                    "height": stored.height if stored else None,
                    "status": status,
                    "error": error,
                    "generated_at": now,
                }
            )
        return rows

    event_cfg = {"backend": backend.backend_name, **params, "images_per_descriptor": cfg.images_per_descriptor}
    audit = AuditInfo(audit_id, backend.model_id, backend.model_version, "t2i", event_cfg)
    planned = [(t, index) for t in targets for index in range(1, cfg.images_per_descriptor + 1)]
    key = lambda item: (item[0].setting, item[0].descriptor, item[0].descriptor_row, item[1])  # noqa: E731
    result = run_resumable(planned, key, generate, table=T2I_TABLE, audit=audit, shard_rows=cfg.shard_rows, progress=progress)
    return T2IRunSummary(
        audit_id, planned=result.planned, already_landed=result.already_landed, generated=result.generated, status=result.statuses
    )
