"""Every zoo model, declared once. `ENTRIES` is built from these declarations when the module is
imported (no model is constructed then) and never changes afterwards.

Tiny variants keep the architecture with dropout off, so the reference interpreter must reproduce
their loss exactly whatever random-number scheme an op's implementation uses.

Settings the papers give are used as given; where they leave a choice open, `notes` says what was
chosen and why. Sizes in the papers' tables are in GiB of fp32 parameters (TensorOpt Table 1: VGG16's
0.52 GB is 138.36M x 4 bytes / 2^30) or, for Tofu Table 2, three times that (weights, gradients and
one optimizer history buffer, Tofu §7.1): the published counts below are derived from them that way.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from types import MappingProxyType

from stratagem.frontend.zoo import hf, inputs
from stratagem.frontend.zoo.entry import Published, Variant, ZooEntry
from stratagem.frontend.zoo.gpt import GPT, GPTConfig, llama_ffn_dim
from stratagem.frontend.zoo.inception import InceptionV3
from stratagem.frontend.zoo.mlp import MLP
from stratagem.frontend.zoo.recurrent import NMT, LSTMClassifier, LSTMLanguageModel
from stratagem.frontend.zoo.transformer import Bert, Transformer
from stratagem.frontend.zoo.vision import RESNET_BLOCKS, VGG, AlexNet, LeNet, ResNet, UNet

GIB = 2 ** 30
FLEXFLOW = "FlexFlow (Jia et al., SysML 2019) §8, Table 4"
TENSOROPT = "TensorOpt (Cai et al., TPDS 2021) §5, Table 1"
TOFU = "Tofu (Wang et al., EuroSys 2019) §7.1, Table 2"


def _images(build, tiny, batch: int, size: int, channels: int = 3, classes: int = 1000,
            tiny_size: int = 32) -> tuple[Variant, Variant]:
    full = Variant(build, partial(inputs.images, channels=channels, size=size, classes=classes), batch)
    small = Variant(tiny, partial(inputs.images, channels=channels, size=tiny_size, classes=10), 2)
    return full, small


def _lm(build, tiny, batch: int, vocab: int, length: int, tiny_vocab: int, tiny_length: int,
        factory=inputs.tokens) -> tuple[Variant, Variant]:
    return (Variant(build, partial(factory, vocab=vocab, length=length), batch),
            Variant(tiny, partial(factory, vocab=tiny_vocab, length=tiny_length), 2))


def _count_from_gib(gib: float, copies: int = 1) -> int:
    return round(gib * GIB / 4 / copies)


# ---- FlexFlow's six, LeNet and RNNLM-2 ---------------------------------------------------------

def flexflow() -> list[ZooEntry]:
    lenet = _images(partial(LeNet), partial(LeNet, 10, (2, 4), (8, 8)), 64, 28, channels=1, classes=10,
                    tiny_size=28)
    alexnet = _images(partial(AlexNet), partial(AlexNet, 10, (4, 6, 8, 8, 8), 16, 2, 0.0), 256, 224, tiny_size=64)
    resnet = _images(partial(ResNet, RESNET_BLOCKS[101]), partial(ResNet, (1, 1, 2, 1), 1, 10, 4), 64, 224)
    inception = _images(partial(InceptionV3), partial(InceptionV3, 10, 16, 0.0), 64, 299, tiny_size=75)
    rnn_setting = "40 unrolled steps, one nn.LSTMCell call per layer per step"
    return [
        ZooEntry("lenet", *lenet, "FlexFlow §8.3 (LeNet-5 on 28x28 MNIST, batch 64)",
                 Published(60_000, "LeCun et al. 1998: about 60,000 parameters")),
        ZooEntry("alexnet", *alexnet, f"{FLEXFLOW}: per-GPU batch 256, synthetic 224x224 images",
                 Published(61_100_840, "torchvision AlexNet (61.1M)")),
        ZooEntry("inception-v3", *inception, f"{FLEXFLOW}: per-GPU batch 64, 299x299 ImageNet",
                 Published(23_834_568, "torchvision Inception-v3 without the auxiliary head (23.83M; 27.16M with it)"),
                 "trained without the auxiliary classifier: the loss is the main head's"),
        ZooEntry("resnet-101", *resnet, f"{FLEXFLOW}: per-GPU batch 64, 224x224 ImageNet",
                 Published(44_549_160, "torchvision ResNet-101 (44.55M)")),
        ZooEntry("rnntc", *_lm(partial(LSTMClassifier, 20480, 1024, 1024, 4, 2),
                               partial(LSTMClassifier, 50, 8, 8, 4, 2), 64, 20480, 40, 50, 5,
                               partial(inputs.labelled_tokens, classes=2)),
                 f"{FLEXFLOW}: 4 LSTM layers of 1024, per-GPU batch 64, {rnn_setting}",
                 notes="vocabulary 20,480 and embedding 1024 as in FlexFlow's nmt/nmt.cc; 2 classes "
                       "(Movie Reviews is binary)"),
        ZooEntry("rnnlm", *_lm(partial(LSTMLanguageModel, 10000, 2048, 2048, 2),
                               partial(LSTMLanguageModel, 50, 8, 8, 2), 64, 10000, 40, 50, 4),
                 f"{FLEXFLOW}: 2 LSTM layers of 2048, per-GPU batch 64, {rnn_setting}",
                 notes="Penn Treebank vocabulary of 10,000; embedding 2048; softmax at every step"),
        ZooEntry("rnnlm-2", *_lm(partial(LSTMLanguageModel, 10000, 2048, 2048, 2),
                                 partial(LSTMLanguageModel, 50, 8, 8, 2), 64, 10000, 2, 50, 2),
                 "FlexFlow §8.3: RNNLM restricted to 2 unrolled steps (the brute-force comparison)",
                 notes="rnnlm with 2 steps"),
        ZooEntry("nmt", Variant(partial(NMT, 20480, 20480, 1024, 2),
                                partial(inputs.translation, source_vocab=20480, target_vocab=20480,
                                        source_length=40, target_length=40), 64),
                 Variant(partial(NMT, 40, 40, 8, 2), partial(inputs.translation, source_vocab=40, target_vocab=40,
                                                            source_length=4, target_length=4), 2),
                 f"{FLEXFLOW}: 2+2 LSTM layers of 1024 with attention, per-GPU batch 64, {rnn_setting}",
                 notes="vocabularies of 20,480 as in FlexFlow's nmt/nmt.cc; additive (Bahdanau) attention "
                       "over the top encoder layer, then tanh(W[s; context]) and a softmax"),
    ]


# ---- TensorOpt's models ------------------------------------------------------------------------

def _seq2seq(build, tiny, batch: int, vocab: int, length: int) -> tuple[Variant, Variant]:
    factory = partial(inputs.translation, source_vocab=vocab, target_vocab=vocab, source_length=length,
                      target_length=length)
    small = partial(inputs.translation, source_vocab=50, target_vocab=50, source_length=6, target_length=6)
    return Variant(build, factory, batch), Variant(tiny, small, 2)


def _transformer(name: str, dim: int, heads: int, gib: float, table: str) -> ZooEntry:
    tiny = partial(Transformer, 50, 16, 2, 32, 2, 16, 0.0)
    return ZooEntry(name, *_seq2seq(partial(Transformer, 37000, dim, heads, 4 * dim, 6, 512), tiny, 256, 37000, 64),
                    f"{TENSOROPT}: batch 256", Published(_count_from_gib(gib), f"{table}: {gib} GB of fp32 parameters"),
                    f"Vaswani et al.'s encoder-decoder (6+6 post-LN layers, FFN 4x, shared 37,000-token "
                    f"embedding and softmax) widened to d_model {dim} ({heads} heads of {dim // heads}) to "
                    f"reach {gib} GB, as TensorOpt sizes it by its hidden size (§5.1); sequences of 64")


def tensoropt() -> list[ZooEntry]:
    vgg_tiny = partial(VGG, (4, 4, "M", 8, 8, "M", 16, 16, 16, "M", 32, 32, 32, "M", 32, 32, 32, "M"), 10, 16, 1,
                       0.0)
    wrn_blocks, wrn_widen = RESNET_BLOCKS[50], 9
    bert_tiny = partial(Bert, 50, 16, 2, 32, 2, 16, 0.0)
    return [
        ZooEntry("vgg16", *_images(partial(VGG), vgg_tiny, 256, 224), f"{TENSOROPT}: batch 256, 0.52 GB",
                 Published(138_357_544, "Simonyan & Zisserman 2015 / torchvision VGG16 (138.36M)")),
        ZooEntry("wideresnet", *_images(partial(ResNet, wrn_blocks, wrn_widen),
                                        partial(ResNet, (1, 1, 1, 1), 2, 10, 2), 256, 224),
                 f"{TENSOROPT}: batch 256",
                 Published(_count_from_gib(7.3), "TensorOpt Table 1: 7.3 GB of fp32 parameters"),
                 "Tofu-style widened ResNet-50 (every conv x9: WResNet-50-9, 7.15 GB), the integer widening "
                 "closest to 7.3 GB; 224x224 images"),
        _transformer("transformer", 3840, 30, 9.7, "TensorOpt Table 1"),
        _transformer("transformer-s", 2688, 21, 4.8, "TensorOpt §5.3 (the Transformer of Table 4)"),
        ZooEntry("rnn", *_lm(partial(LSTMLanguageModel, 10000, 24576, 24576, 6),
                             partial(LSTMLanguageModel, 50, 16, 16, 2), 256, 10000, 20, 50, 3),
                 f"{TENSOROPT}: batch 256",
                 Published(_count_from_gib(108), "TensorOpt Table 1: 108 GB of fp32 parameters"),
                 "6 LSTM layers of 24,576 (whose weights alone are 108.0 GB), embedding 24,576, a 10,000-word "
                 "vocabulary, 20 unrolled steps as in Tofu's RNN"),
        ZooEntry("bert-base", Variant(partial(Bert), partial(inputs.bert_pretraining, vocab=30522, length=128), 256),
                 Variant(bert_tiny, partial(inputs.bert_pretraining, vocab=50, length=6), 2),
                 "TensorOpt §3 (BERT's graph structure); BERT-base pre-training, 256 sequences of 128 tokens",
                 Published(109_482_240, "Devlin et al. 2019 BERT-base as in Hugging Face BertModel (109.48M)"),
                 "with the masked-LM head (decoder tied to the word embeddings) and the next-sentence "
                 "head, which add 0.62M to BertModel"),
    ]


# ---- Tofu's WResNet and RNN --------------------------------------------------------------------

TOFU_WRESNET_GB = {(50, 4): 4.2, (50, 6): 9.6, (50, 8): 17.1, (50, 10): 26.7,
                   (101, 4): 7.8, (101, 6): 17.1, (101, 8): 30.6, (101, 10): 47.7,
                   (152, 4): 10.5, (152, 6): 23.4, (152, 8): 41.7, (152, 10): 65.1}
TOFU_RNN_GB = {(6, 4): 8.4, (8, 4): 11.4, (10, 4): 14.4, (6, 6): 18.6, (8, 6): 28.5, (10, 6): 32.1,
               (6, 8): 33.0, (8, 8): 45.3, (10, 8): 57.0}


def tofu() -> list[ZooEntry]:
    entries = []
    for (depth, widen), gb in TOFU_WRESNET_GB.items():
        entries.append(ZooEntry(
            f"wresnet-{depth}-{widen}",
            *_images(partial(ResNet, RESNET_BLOCKS[depth], widen), partial(ResNet, (1, 1, 1, 1), 2, 10, 2), 128, 224),
            f"{TOFU}: WResNet-{depth}-{widen}, 224x224 ImageNet, global batch 128",
            Published(_count_from_gib(gb, 3), f"Tofu Table 2: {gb} GB = 3 x fp32 weights"),
            f"ResNet-{depth} with every conv's channels x{widen}"))
    for (layers, thousands), gb in TOFU_RNN_GB.items():
        hidden = 1024 * thousands
        entries.append(ZooEntry(
            f"rnn-{layers}-{thousands}k",
            *_lm(partial(LSTMLanguageModel, 2048, 512, hidden, layers),
                 partial(LSTMLanguageModel, 40, 8, 16, 2), 512, 2048, 20, 40, 3),
            f"{TOFU}: RNN-{layers}-{thousands}K, {layers} LSTM layers of {hidden}, 20 unrolled steps, global batch 512",
            Published(_count_from_gib(gb, 3), f"Tofu Table 2: {gb} GB = 3 x fp32 weights"),
            "embedding 512 and vocabulary 2,048: Table 2 grows as (8L - 4) H^2, so the first layer's input "
            "is narrow and the softmax small; these match all its entries within 2% except RNN-8-6K "
            "(28.5 GB, out of line with its row)"))
    return entries


# ---- LLaMA-style decoders ----------------------------------------------------------------------

def _gpt(name: str, cfg: GPTConfig, published: Published | None, source: str, tiny_kv_heads: int) -> ZooEntry:
    tiny_cfg = GPTConfig(64, 32, 2, 4, tiny_kv_heads, llama_ffn_dim(32, multiple_of=16), 8, cfg.tie_embeddings)
    return ZooEntry(name, *_lm(partial(GPT, cfg), partial(GPT, tiny_cfg), 8, cfg.vocab_size, cfg.seq_len, 64, 8),
                    source, published,
                    f"{cfg.num_layers} layers, d {cfg.dim}, {cfg.num_heads} heads ({cfg.num_kv_heads} kv), "
                    f"SwiGLU {cfg.ffn_dim}, vocab {cfg.vocab_size}, {cfg.seq_len} tokens; RMSNorm, rotary; "
                    f"batch of 8 sequences (a micro-batch: the source papers' global batches are 0.5M-4M tokens)")


def bf16_mixed(entry: ZooEntry) -> ZooEntry:
    """A decoder of a billion parameters or more: its users train it in bf16 mixed precision
    (LLaMA 2, TinyLlama; GPT-3 in fp16 mixed), so it is planned so unless told otherwise."""
    return replace(entry, precision="bf16-mixed")


def gpt() -> list[ZooEntry]:
    gpt3 = "GPT-3 (Brown et al. 2020) Table 2.1 size, LLaMA-style blocks, tied embeddings"
    llama2 = "LLaMA 2 (Touvron et al. 2023)"
    entries = [
        _gpt("gpt-tiny", GPTConfig(8192, 256, 4, 4, 4, llama_ffn_dim(256), 256), None,
             "a small LLaMA-style decoder for quick runs", 4),
        _gpt("gpt-125m", GPTConfig(50257, 768, 12, 12, 12, llama_ffn_dim(768), 2048, True),
             Published(125_000_000, "GPT-3 Table 2.1: 125M"), gpt3, 4),
        _gpt("gpt-1.3b", GPTConfig(50257, 2048, 24, 16, 16, llama_ffn_dim(2048), 2048, True),
             Published(1_300_000_000, "GPT-3 Table 2.1: 1.3B"), gpt3, 4),
        _gpt("gpt-7b", GPTConfig(32000, 4096, 32, 32, 32, llama_ffn_dim(4096), 4096),
             Published(6_738_415_616, "LLaMA-2-7B"), f"{llama2} 7B configuration", 4),
        _gpt("gpt-13b", GPTConfig(32000, 5120, 40, 40, 40, llama_ffn_dim(5120), 4096),
             Published(13_015_864_320, "LLaMA-2-13B"), f"{llama2} 13B configuration", 4),
        _gpt("gpt-70b", GPTConfig(32000, 8192, 80, 64, 8, llama_ffn_dim(8192, 1.3, 4096), 4096),
             Published(68_976_648_192, "LLaMA-2-70B"), f"{llama2} 70B configuration (grouped-query attention)", 2),
    ]
    return [bf16_mixed(e) if e.name in ("gpt-1.3b", "gpt-7b", "gpt-13b", "gpt-70b") else e for e in entries]


# ---- small models for runtime checks -----------------------------------------------------------

def basics() -> list[ZooEntry]:
    full = Variant(partial(MLP, 1024, 1024, 3, 10), partial(inputs.features, size=1024, classes=10), 64)
    tiny = Variant(partial(MLP, 16, 32, 2, 4), partial(inputs.features, size=16, classes=4), 8)
    return [ZooEntry("mlp", full, tiny, "stratagem's runtime checks and CPU fidelity runs",
                     notes="3 hidden layers of 1024 on 1024 features, 10 classes, batch 64: a step is a "
                           "few tens of milliseconds on one CPU core, so measured times are compute, "
                           "not Python overhead"),
            ZooEntry("resnet-tiny", *_images(partial(ResNet, (1, 1, 1, 1), 1, 10, 16),
                                             partial(ResNet, (1, 1, 1, 1), 1, 10, 4), 32, 32, classes=10),
                     "CPU fidelity runs: a convolutional model beside mlp, gpt-tiny and transformer-mini",
                     notes="the zoo's bottleneck ResNet with one block per stage (ResNet-14 shape), base "
                           "width 16 (stages of 64-512 channels), 10 classes, 32x32 RGB images in batches "
                           "of 32 (0.51M parameters): a step is about 40 ms on one CPU core; tiny: base 4, "
                           "batch 2"),
            ZooEntry("transformer-mini",
                     *_seq2seq(partial(Transformer, 2000, 128, 4, 512, 2, 64, 0.0),
                               partial(Transformer, 50, 16, 2, 32, 2, 16, 0.0), 16, 2000, 64),
                     "CPU fidelity runs: an encoder-decoder beside mlp, gpt-tiny and resnet-tiny",
                     notes="the zoo's encoder-decoder Transformer (as `transformer`) with 2+2 layers, d_model "
                           "128 (4 heads of 32), FFN 512, a shared 2,000-token vocabulary, no dropout; 16 "
                           "pairs of 64-token sequences (1.18M parameters): a step is about 270 ms on one "
                           "CPU core. Not `transformer-tiny`, which names the tiny variant of `transformer`")]


def spatial() -> list[ZooEntry]:
    """Large images, small batches: where splitting positions (halos) pays."""
    full = Variant(partial(UNet), partial(inputs.segmentation, channels=3, size=512, classes=2), 4)
    tiny = Variant(partial(UNet, 3, (4, 8, 16)), partial(inputs.segmentation, channels=3, size=32, classes=3), 2)
    return [ZooEntry("unet", full, tiny, "U-Net (Ronneberger et al., MICCAI 2015): 512x512 images, batch 4",
                     None,
                     "padded 3x3 convolutions (the output keeps the input's size, not the paper's valid ones "
                     "with cropped skips); up-convolution as x2 nearest upsampling and a 3x3 convolution; "
                     "no batch norm, as in the paper; 34.5M parameters (the paper's 2x2 up-convolutions would make "
                     "31.0M); a batch of 4 images")]


# ---- Hugging Face configs ----------------------------------------------------------------------

def _hf(name: str, model: str, config: str, full: dict, tiny: dict, batch: int, length: int,
        published: Published, source: str) -> ZooEntry:
    vocab = full.get("vocab_size", 32000)
    return ZooEntry(name, *_lm(partial(hf.build, model, config, full), partial(hf.build, model, config, tiny),
                               batch, vocab, length, tiny["vocab_size"], 8, inputs.token_labels),
                    source, published, "built from a config in code (no download)", "transformers")


def huggingface() -> list[ZooEntry]:
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    gpt2_tiny = {"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 64, "n_positions": 32,
                 "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    bert_tiny = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                 "vocab_size": 64, "max_position_embeddings": 32, **no_dropout}
    llama_tiny = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 32}
    t5 = {"decoder_start_token_id": 0, "pad_token_id": 0}
    t5_tiny = {"d_model": 32, "d_ff": 64, "num_layers": 2, "num_heads": 2, "d_kv": 16, "vocab_size": 64,
               "dropout_rate": 0.0, **t5}
    tinyllama = {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
                 "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048}
    return [
        _hf("hf:gpt2", "GPT2LMHeadModel", "GPT2Config", {}, gpt2_tiny, 8, 1024,
            Published(124_439_808, "Hugging Face gpt2 (124.44M)"), "GPT-2 small (Radford et al. 2019)"),
        _hf("hf:bert-base-uncased", "BertForMaskedLM", "BertConfig", {}, bert_tiny, 256, 128,
            Published(109_482_240, "Hugging Face bert-base-uncased BertModel (109.48M)"),
            "BERT-base, masked-LM loss (no pooler; adds the MLM transform and decoder bias)"),
        bf16_mixed(_hf("hf:llama", "LlamaForCausalLM", "LlamaConfig", tinyllama, llama_tiny, 8, 2048,
                       Published(1_100_048_384, "TinyLlama-1.1B (Zhang et al. 2024)"),
                       "a small LLaMA: TinyLlama-1.1B's config")),
        bf16_mixed(_hf("hf:llama-7b", "LlamaForCausalLM", "LlamaConfig", {}, llama_tiny, 8, 4096,
                       Published(6_738_415_616, "LLaMA-2-7B"), "LLaMA 7B shape (LlamaConfig defaults)")),
        _hf("hf:t5-small", "T5ForConditionalGeneration", "T5Config", t5, t5_tiny, 128, 512,
            Published(60_506_624, "Hugging Face t5-small (60.51M)"), "T5-small (Raffel et al. 2020), 128 x 512 tokens"),
    ]


ENTRIES = MappingProxyType({e.name: e for e in (*flexflow(), *tensoropt(), *tofu(), *gpt(), *basics(), *spatial(), *huggingface())})
