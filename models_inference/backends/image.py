"""Text-to-image backends: one interface (:class:`ImageBackend`), two implementations.

* :class:`DiffusersImageBackend`: a ``diffusers`` text-to-image pipeline by hub id or local
  folder (BiasDora: Stable Diffusion, DPMSolverMultistepScheduler, 20 steps, VAE swapped for
  ``stabilityai/sd-vae-ft-mse``), fp16 on GPU / fp32 on CPU, batched, one seeded
  ``torch.Generator`` per image so an image depends on its seed, not on its batch.
* :class:`OpenAIImagesBackend`: the OpenAI Images API (BiasDora: DALL-E 3, 1024x1024, standard
  quality, vivid and natural styles) through the one client helper
  (:mod:`models_inference.backends.openai_api`), any base URL.

The backends' defaults are neutral (the libraries' and the API's own, :data:`DEFAULT_SD_STEPS`
aside); a family's paper settings (BiasDora's steps, VAE, size, quality, styles) are stated
once next to its prompts (:mod:`models_inference.probes.biasdora.prompts`) and passed in.
Model versions: :func:`models_inference.model_ref.model_version`.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from ingestion.errors import ModelNotAvailableError
from models_inference.backends.base import build_backend
from models_inference.backends.local import torch_device_dtype
from models_inference.backends.model_folder import load_failure_cause
from models_inference.backends.openai_api import OpenAIEndpoint, api_error_text
from models_inference.model_ref import model_version

#: Denoising steps when the caller names none: DPM-Solver multistep (the scheduler this backend
#: installs) is built to sample well in about 20 steps (Lu et al. 2022), where the diffusers
#: pipelines' own default of 50 assumes slower schedulers.
DEFAULT_SD_STEPS = 20


def png_bytes(image) -> bytes:
    """PNG bytes of a PIL image (no metadata, so equal pixels give equal bytes)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


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


@dataclass
class DiffusersImageBackend:
    """A ``diffusers`` text-to-image pipeline (paper: Stable Diffusion). Build with :meth:`load`.

    Attributes:
        steps: denoising steps (:data:`DEFAULT_SD_STEPS`; BiasDora: 20). guidance_scale: classifier-free guidance (7.5,
            the Stable Diffusion default). height / width: pixels (None = the model's default,
            512 for SD 1.x). batch_size: images per pipeline call. scheduler: the scheduler
            class in use (paper: DPMSolverMultistepScheduler).
    """

    model_id: str
    model_version: str
    pipeline: object = field(repr=False)
    steps: int = DEFAULT_SD_STEPS
    guidance_scale: float = 7.5
    height: int | None = None
    width: int | None = None
    batch_size: int = 4
    vae: str | None = None
    scheduler: str = "DPMSolverMultistepScheduler"
    device: str = "cpu"
    dtype: str = "float32"
    backend_name: str = "diffusers"
    prompt_suffix: str = ""  # the paper's SD style suffix, appended with no space by the T2I probe

    @classmethod
    def load(
        cls,
        model_ref: str,
        *,
        vae: str | None = None,
        steps: int = DEFAULT_SD_STEPS,
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
                :data:`models_inference.probes.biasdora.t2i.PAPER_SD_PROMPT_SUFFIX`); recorded in every row's ``prompt``.

        Raises:
            ModelNotAvailableError: the pipeline or VAE cannot be loaded here.
        """
        from diffusers import AutoencoderKL, AutoPipelineForText2Image, DPMSolverMultistepScheduler

        device, dtype = torch_device_dtype(device)
        loading_vae = False  # which folder the message checks: the pipeline's, or the swapped VAE's
        try:
            pipe = AutoPipelineForText2Image.from_pretrained(model_ref, torch_dtype=dtype)
            if vae:
                loading_vae = True
                pipe.vae = AutoencoderKL.from_pretrained(vae, torch_dtype=dtype)
        # a partial folder fails with whatever the loader trips on first (OSError, a
        # SafetensorError, an AttributeError ...): each means this pipeline cannot load
        except Exception as exc:
            what, cause = (
                (f"VAE {vae!r}", load_failure_cause(vae, "component", exc, "weights"))
                if loading_vae
                else (f"text-to-image model {model_ref!r}", load_failure_cause(model_ref, "text-to-image", exc, "pipeline"))
            )
            raise ModelNotAvailableError(
                f"cannot load {what} here: {cause}. Use a local folder (save_pretrained) or a hub id already in the "
                "Hugging Face cache, or unset HF_HUB_OFFLINE on a machine with hub access."
            ) from exc
        if dpm_solver:
            pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
        pipe = pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        version = model_version(model_ref)
        if vae:
            version += "+vae-" + model_version(vae)[:18]
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
                for image, flagged in zip(out.images, flags, strict=True):
                    status = "filtered" if flagged else "ok"
                    results.append(ImageResult(png_bytes(image), status, "safety checker flagged the image" if flagged else None))
            if on_batch:
                on_batch(len(batch))
        return results


@dataclass
class OpenAIImagesBackend(OpenAIEndpoint):
    """The OpenAI Images API (paper: DALL-E 3) or any compatible endpoint
    (:class:`~models_inference.backends.openai_api.OpenAIEndpoint`: key from the environment,
    redacted error texts, the client's retries, ``concurrency`` requests in flight).

    Image i of a descriptor is drawn in style ``styles[(i - 1) % len(styles)]``, so the
    paper's "vivid and natural" splits each descriptor's images evenly between the two
    styles (vivid first). A 400 (content policy) is ``refused`` and final, other errors are
    retried on the next run.

    Attributes:
        size, quality, styles: request fields (default: the API's 1024x1024, no quality and no
            style sent; BiasDora passes 1024x1024, standard, vivid + natural); an empty
            ``styles`` sends no style (models without one, e.g. gpt-image-1).
    """

    model_id: str = "dall-e-3"
    timeout: float = 120.0
    size: str = "1024x1024"  # the Images API's default size
    quality: str | None = None  # None sends no quality: the API's default
    styles: tuple[str, ...] = ()  # none sent: the API's default style

    def __post_init__(self):
        super().__post_init__()
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

        def one(client, key, req: ImageRequest) -> ImageResult:
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
            except Exception as exc:  # noqa: BLE001 - the key-quoting proxy case: never stored; bad replies too
                return ImageResult(None, "error", api_error_text(exc, key), style=style)
            item = resp.data[0] if getattr(resp, "data", None) else None
            if item is None or not item.b64_json:
                return ImageResult(None, "error", "the response carries no b64_json image", style=style)
            try:
                data = base64.b64decode(item.b64_json, validate=True)
            except ValueError as exc:
                return ImageResult(None, "error", f"invalid base64 image: {exc}", style=style)
            return ImageResult(data, "ok", None, getattr(item, "revised_prompt", None), style)

        return self.each(requests, one, on_batch)


#: T2I backend name (:data:`~ingestion.vocabulary.T2I_BACKENDS`) -> its constructor.
IMAGE_BACKENDS = {"diffusers": DiffusersImageBackend.load, "openai": lambda m, **kw: OpenAIImagesBackend(model_id=m, **kw)}


def load_image_backend(model: str, *, backend: str = "diffusers", **kwargs) -> ImageBackend:
    """:data:`IMAGE_BACKENDS` ``[backend](model, **kwargs)`` (ValueError for an unknown name;
    ModelNotAvailableError when the model cannot be loaded)."""
    return build_backend("T2I", backend, model, IMAGE_BACKENDS, **kwargs)


__all__ = ["DiffusersImageBackend", "ImageBackend", "ImageRequest", "ImageResult", "OpenAIImagesBackend", "load_image_backend", "png_bytes"]
