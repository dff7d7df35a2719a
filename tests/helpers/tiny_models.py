"""Tiny random-weight models built from configs and saved with ``save_pretrained``, so dora's
own backends load them by path offline (no such weights ship, docs/operations.md#models-offline-and-real). One builder per model
kind; each takes the folder to save into and returns the saved folder (the same seeds as the
test modules used before these builders were shared, so their outputs are unchanged).

Random weights draw noise and say random words: tests check what the pipeline does with them."""

from __future__ import annotations

import json
from pathlib import Path

#: Real English words: the tiny LLaVA / captioner vocabulary of the T2I -> I2T chain
#: (tests/test_t2i_i2t.py), so their random descriptions are words.
ENGLISH_WORDS = """the a an of and with in on is are this image shows man woman person people child old young
sitting standing holding wearing shirt dress jacket hat glasses blue red green black white brown dark
light hair smiling happy sad calm lonely angry table chair bar glass street park background window
wall room kitchen dog cat book phone bag tall short wide bench tree car house door road
describe objectively subjectively""".split()

#: The VLStereoSet scorers' vocabulary (tests/test_vlstereoset_scorers.py).
VLSTEREOSET_WORDS = "the a my is was are he she his her sister mother man woman person sibling caring rude hi describe image".split()


#: Each builder's token list after the special tokens, in token-id order (the order fixes the
#: random models' outputs): words, punctuation and, for VLStereoSet, the mcq answer letters.
ENGLISH_TOKENS = ENGLISH_WORDS + [".", ",", ":"]
VLSTEREOSET_TOKENS = VLSTEREOSET_WORDS + [".", ",", ":", "A", "B", "C"]


def word_tokenizer(tokens: list[str], **extra):
    """A word-level fast tokenizer: the special tokens, then ``tokens``; returns (tokenizer, vocab)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<s>", "</s>", "<image>"]
    vocab = {t: i for i, t in enumerate(specials + list(tokens))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with spaces
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        model_input_names=["input_ids", "attention_mask"],
        **extra,
    )
    return tok, vocab


def build_tiny_sd(folder: Path) -> tuple[Path, Path]:
    """A tiny Stable Diffusion pipeline and a second VAE, saved; returns (pipeline dir, VAE dir)."""
    import torch
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(8, 16),
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=2,
        norm_num_groups=4,
    )

    def vae():
        return AutoencoderKL(
            block_out_channels=[8, 16],
            in_channels=3,
            out_channels=3,
            latent_channels=4,
            norm_num_groups=4,
            down_block_types=["DownEncoderBlock2D"] * 2,
            up_block_types=["UpDecoderBlock2D"] * 2,
            sample_size=16,
        )

    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    vocab.update({c: len(vocab) for c in letters})
    vocab.update({c + "</w>": len(vocab) for c in letters})
    tok_dir = folder / "clip_tokenizer_src"
    tok_dir.mkdir(parents=True, exist_ok=True)
    (tok_dir / "vocab.json").write_text(json.dumps(vocab))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=32)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
            projection_dim=16,
        )
    )
    pipe = StableDiffusionPipeline(
        vae=vae(),
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=PNDMScheduler(skip_prk_steps=True, steps_offset=1),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder / "tiny-sd")
    vae().save_pretrained(folder / "tiny-vae")
    return folder / "tiny-sd", folder / "tiny-vae"


LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}USER: {% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<image>\n{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %} ASSISTANT:{% endif %}"
)


def build_tiny_llava(folder: Path, tokens: list[str] = ENGLISH_TOKENS) -> Path:
    """A tiny LLaVA (CLIP vision tower + Llama decoder) with processor and LLaVA-1.5's chat template, saved.

    ``tokens`` is its vocabulary: English words by default (the T2I -> I2T chain),
    ``VLSTEREOSET_TOKENS`` for the VLStereoSet scorers."""
    import torch
    from transformers import CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tok, vocab = word_tokenizer(tokens, extra_special_tokens={"image_token": "<image>"})
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16}),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        chat_template=LLAVA_TEMPLATE,
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=8, projection_dim=16
        ),
        text_config=LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=512,
            bos_token_id=2,
            eos_token_id=3,
            pad_token_id=1,
        ),
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        pad_token_id=1,
    )
    torch.manual_seed(1)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.eos_token_id = 3
    out = folder / "tiny-llava"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_tiny_captioner(folder: Path) -> Path:
    """A tiny VisionEncoderDecoderModel (ViT encoder + GPT-2 decoder), tokenizer and image processor, saved."""
    import torch
    from transformers import GPT2Config, VisionEncoderDecoderConfig, VisionEncoderDecoderModel, ViTConfig, ViTImageProcessor

    tok, vocab = word_tokenizer(ENGLISH_TOKENS, additional_special_tokens=["<image>"])
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(
        ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, image_size=16, patch_size=8),
        GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=1, n_head=2, n_positions=128, bos_token_id=2, eos_token_id=3),
    )
    config.decoder_start_token_id, config.pad_token_id, config.eos_token_id = 2, 1, 3
    torch.manual_seed(2)
    model = VisionEncoderDecoderModel(config)
    out = folder / "tiny-captioner"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(out)
    return out


def build_tiny_clip(folder: Path) -> Path:
    """A tiny random CLIPModel (text + vision towers) over the VLStereoSet words, saved."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    tok, vocab = word_tokenizer(VLSTEREOSET_TOKENS)
    config = CLIPConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 32,
            "bos_token_id": 2,
            "eos_token_id": 3,
            "pad_token_id": 1,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 16,
            "patch_size": 8,
        },
        projection_dim=8,
    )
    torch.manual_seed(3)
    out = folder / "tiny-clip"
    CLIPModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    CLIPImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16}).save_pretrained(out)
    return out


def build_tiny_blip(folder: Path) -> Path:
    """A tiny BLIP retrieval model (ITM head) with a BERT word-piece tokenizer, saved."""
    import torch
    from transformers import BertTokenizerFast, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor, BlipProcessor

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"my the is was sister sibling mother parent caring rude hi . ,".split()]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    config = BlipConfig(
        text_config={
            "vocab_size": len(words),
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            "encoder_hidden_size": 16,
        },
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 16,
            "patch_size": 8,
        },
        projection_dim=8,
        image_text_hidden_size=16,
    )
    torch.manual_seed(4)
    out = folder / "tiny-blip"
    BlipForImageTextRetrieval(config).save_pretrained(out)
    BlipProcessor(image_processor=BlipImageProcessor(size={"height": 16, "width": 16}), tokenizer=tok).save_pretrained(out)
    return out


def tiny_classifier(folder, labels):
    """A tiny random-weight DistilBERT sequence classifier with a WordPiece vocab, saved to ``folder``."""
    import torch
    from transformers import BertTokenizerFast, DistilBertConfig, DistilBertForSequenceClassification

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "an", "old", "person", "is", "a", "liar", "happy", "child"]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizerFast(
        vocab_file=str(folder / "vocab.txt"),
        do_lower_case=True,
        model_max_length=64,
        model_input_names=["input_ids", "attention_mask"],  # as DistilBERT's own tokenizer
    )
    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=len(words),
        dim=32,
        hidden_dim=64,
        n_layers=2,
        n_heads=2,
        max_position_embeddings=64,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={l: i for i, l in enumerate(labels)},
    )
    model = DistilBertForSequenceClassification(config).eval()
    tok.save_pretrained(folder)
    model.save_pretrained(folder)
    return tok, model
